package inherit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestSeal opens a file as a parent shell would hand it down (not
// close-on-exec) and checks that a child started after Seal, and after
// sealEach, no longer has it, while this process still reads it.
func TestSeal(t *testing.T) {
	for _, c := range []struct {
		name string
		seal func() error
	}{
		{"close_range", Seal},
		{"one by one", sealEach},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(path, []byte("inherited"), 0o600); err != nil {
				t.Fatal(err)
			}
			fd, err := syscall.Open(path, syscall.O_RDONLY, 0) // no O_CLOEXEC
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Close(fd)
			child := func() string {
				out, err := exec.Command("/bin/sh", "-c", "test -e /proc/self/fd/"+strconv.Itoa(fd)+" && echo open || echo closed").Output()
				if err != nil {
					t.Fatal(err)
				}
				return strings.TrimSpace(string(out))
			}
			if got := child(); got != "open" {
				t.Fatalf("before sealing, a child finds descriptor %d %s: the test sees nothing", fd, got)
			}
			if err := c.seal(); err != nil {
				t.Fatal(err)
			}
			if got := child(); got != "closed" {
				t.Errorf("after sealing, a child finds descriptor %d %s", fd, got)
			}
			buf := make([]byte, 16)
			n, err := syscall.Pread(fd, buf, 0)
			if err != nil || string(buf[:n]) != "inherited" {
				t.Errorf("this process reads %q, %v from its own descriptor after sealing", buf[:n], err)
			}
		})
	}
}
