package plainfile_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/pond-htc/pond/condor/internal/plainfile"
)

// TestOpen: files open, create and fail as os.OpenFile's do, their
// descriptors close-on-exec and blocking.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(filepath.Join(dir, "there"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("there", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		flag int
		perm os.FileMode
		want error // nil: opens
	}{
		{"creates", file, os.O_WRONLY | os.O_CREATE | os.O_EXCL, 0o640, nil},
		{"exists", file, os.O_WRONLY | os.O_CREATE | os.O_EXCL, 0o640, os.ErrExist},
		{"missing", filepath.Join(dir, "nope"), os.O_RDONLY, 0, os.ErrNotExist},
		{"link not followed", filepath.Join(dir, "link"), os.O_RDONLY | syscall.O_NOFOLLOW, 0, syscall.ELOOP},
		{"directory", dir, os.O_RDONLY | syscall.O_DIRECTORY, 0, nil},
		{"not a directory", file, os.O_RDONLY | syscall.O_DIRECTORY, 0, syscall.ENOTDIR},
		{"device", os.DevNull, os.O_RDWR, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := plainfile.Open(tt.path, tt.flag, tt.perm)
			if tt.want != nil {
				var pe *os.PathError
				if !errors.Is(err, tt.want) || !errors.As(err, &pe) || pe.Path != tt.path {
					t.Fatalf("Open = %v, want a path error of %v", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var fdFlags, flFlags int
			if err := withFd(f, func(fd uintptr) {
				fdFlags, _ = fcntl(fd, syscall.F_GETFD)
				flFlags, _ = fcntl(fd, syscall.F_GETFL)
			}); err != nil {
				t.Fatal(err)
			}
			if fdFlags&syscall.FD_CLOEXEC == 0 || flFlags&syscall.O_NONBLOCK != 0 {
				t.Errorf("descriptor flags %#x, file flags %#x: want close-on-exec and blocking", fdFlags, flFlags)
			}
			if tt.flag&os.O_CREATE != 0 {
				fi, err := f.Stat()
				if err != nil || fi.Mode().Perm()&^tt.perm != 0 {
					t.Errorf("created with %v (%v), want within %v", fi.Mode(), err, tt.perm)
				}
			}
			if tt.flag&syscall.O_DIRECTORY != 0 {
				names, err := f.Readdirnames(-1)
				if err != nil || !slices.Contains(names, "there") {
					t.Errorf("directory names %v, %v", names, err)
				}
			}
		})
	}
}

// TestReadFile: ReadFile reads what os.ReadFile reads, short, empty, long,
// and from /proc, whose files have no size; a missing file is an error.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, 511, 512, 513, 100_000} {
		path := filepath.Join(dir, "f")
		want := bytes.Repeat([]byte("abcdefg"), size/7+1)[:size]
		if err := os.WriteFile(path, want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := plainfile.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%d bytes: read %d bytes, %v", size, len(got), err)
		}
	}
	want, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc")
	}
	got, err := plainfile.ReadFile("/proc/self/status")
	if err != nil || !bytes.HasPrefix(got, want[:16]) || len(got) < len(want)/2 {
		t.Errorf("/proc/self/status: %q, %v", got, err)
	}
	if _, err := plainfile.ReadFile(filepath.Join(dir, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

func withFd(f *os.File, fn func(fd uintptr)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(fn)
}

func fcntl(fd uintptr, cmd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, uintptr(cmd), 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
