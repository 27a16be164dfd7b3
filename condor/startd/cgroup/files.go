package cgroup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// files are the files of a group read or written more than once (its
// accounting, its counters reset), kept open: opening a file of a cgroup
// file system costs far more than reading it again from offset 0 (about
// 35 µs against 2 on the development machine, see BenchmarkJobCycle).
// Not cgroup.procs: v1 keeps the list of processes an open file read
// first, and reading it again from the start shows the same list.
type files struct {
	mu   sync.Mutex
	open map[string]*os.File // by path
	buf  []byte
}

// read reads the file path whole.
func (kf *files) read(path string) ([]byte, error) {
	kf.mu.Lock()
	defer kf.mu.Unlock()
	var b []byte
	err := kf.use(path, os.O_RDONLY, func(f *os.File) error {
		if kf.buf == nil {
			kf.buf = make([]byte, 4096)
		}
		for {
			n, err := f.ReadAt(kf.buf, 0)
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if n < len(kf.buf) {
				b = append([]byte(nil), kf.buf[:n]...)
				return nil
			}
			kf.buf = make([]byte, 2*len(kf.buf))
		}
	})
	return b, err
}

// write writes v to the file path.
func (kf *files) write(path, v string) error {
	kf.mu.Lock()
	defer kf.mu.Unlock()
	err := kf.use(path, os.O_WRONLY, func(f *os.File) error {
		_, err := f.WriteAt([]byte(v), 0)
		return err
	})
	if err != nil {
		return fmt.Errorf("writing %s to %s: %w", v, path, err)
	}
	return nil
}

// use calls do with the file path open with flag (O_RDONLY or O_WRONLY),
// kept open from an earlier call where it can be. A kept file that fails
// (its cgroup removed and made again meanwhile) is opened again once.
func (kf *files) use(path string, flag int, do func(*os.File) error) error {
	key := path
	if flag == os.O_WRONLY {
		key = "w:" + path
	}
	if f := kf.open[key]; f != nil {
		if err := do(f); err == nil {
			return nil
		}
		f.Close()
		delete(kf.open, key)
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return err
	}
	if err := do(f); err != nil {
		f.Close()
		return err
	}
	if kf.open == nil {
		kf.open = map[string]*os.File{}
	}
	kf.open[key] = f
	return nil
}

// close closes the files kept open.
func (kf *files) close() {
	kf.mu.Lock()
	defer kf.mu.Unlock()
	for k, f := range kf.open {
		f.Close()
		delete(kf.open, k)
	}
}

// readInt reads a file of one integer ("max" reads as 0).
func (kf *files) readInt(path string) (int64, error) {
	b, err := kf.read(path)
	if err != nil {
		return 0, err
	}
	return parseInt(b)
}

// readKV reads a flat keyed file ("name value" lines).
func (kf *files) readKV(path string) (map[string]int64, error) {
	b, err := kf.read(path)
	if err != nil {
		return nil, err
	}
	return parseKV(b), nil
}

func parseInt(b []byte) (int64, error) {
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}
