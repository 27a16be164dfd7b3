// Package plainfile opens files that are read and written in place (regular
// files, directories, devices such as /dev/null) without asking the Go
// runtime's poller about them. os.OpenFile offers every file it opens on
// Linux to epoll: it makes the descriptor non-blocking, asks epoll (which
// refuses a regular file or a directory), and makes it blocking again, four
// fcntl calls and an epoll_ctl besides the open; a daemon that opens a few
// files for every job it runs pays them each time. A file opened here costs
// the open and one fcntl ([os.NewFile] checks the descriptor's flags), and
// behaves as one [os.OpenFile] opened, its reads and writes blocking.
package plainfile

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// Open opens name as os.OpenFile does, with flag (O_CLOEXEC is added) and,
// for a file it creates, perm's permission bits (as the umask leaves
// them). Its error is an *os.PathError, as os.OpenFile's.
func Open(name string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// ReadFile reads the whole file name, as os.ReadFile does.
func ReadFile(name string) ([]byte, error) {
	f, err := Open(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 0, 512)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return buf, nil
			}
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}
