package acceptance

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

func execPond(w *workdir, args ...string) *exec.Cmd {
	cmd := exec.Command(pondBin, args...)
	cmd.Dir = w.dir
	cmd.Env = w.env
	return cmd
}

// lineWaiter is an io.Writer that closes seen once want has been written.
type lineWaiter struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
	done bool
}

func (l *lineWaiter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if !l.done && strings.Contains(l.buf.String(), l.want) {
		l.done = true
		close(l.seen)
	}
	return len(p), nil
}

// cmdlineHas reports whether process pid was started with flag followed
// by value.
func cmdlineHas(pid int, flag, value string) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(raw), "\x00")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag && args[i+1] == value {
			return true
		}
	}
	return false
}
