package acceptance

import (
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
