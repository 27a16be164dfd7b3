package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// Errors a connection to a host fails with, wrapped with the host's name:
// those of every SSH connection (overlay/glidein/remote).
var (
	// ErrUnknownHost: the host's key is not in the known_hosts file.
	ErrUnknownHost = remote.ErrUnknownHost
	// ErrHostKeyChanged: the host presented a key other than the one
	// the known_hosts file has for it, which may be an attack.
	ErrHostKeyChanged = remote.ErrHostKeyChanged
	// ErrKeyRejected: the host refused every key the site offered.
	ErrKeyRejected = remote.ErrKeyRejected
	// ErrUnreachable: no SSH connection could be made to the host.
	ErrUnreachable = remote.ErrUnreachable
)

// host is one configured host and the site's connection to it.
type host struct {
	// addr is HOST:PORT, the host as configured, with its port: what
	// the host is known by.
	addr string
	// user logs in on the host: its entry's, else Config.User.
	user string
	// key names the host's directory under BASE/hosts.
	key string

	mu     sync.Mutex
	runner *remote.SSH
	// verified holds the checksums of the binaries known to be on the
	// host, verified by this site.
	verified map[string]bool
	// binMu serializes copying binaries to the host, and guards
	// verified and checked.
	binMu sync.Mutex
	// checked is set once the host passed checkScript.
	checked bool
}

// hostKey is the name of a host's directory: its address with every
// character other than letters, digits, '.', '-' and '_' made '_'.
func hostKey(addr string) string {
	b := []byte(addr)
	for i, c := range b {
		if !validName(string(c), ".-_") {
			b[i] = '_'
		}
	}
	return string(b)
}

// hostErr names the host in err.
func (h *host) errorf(format string, a ...any) error {
	return fmt.Errorf("ssh host %s: "+format, append([]any{h.addr}, a...)...)
}

// runner returns the host's connection (remote.SSH), made when first
// asked for: one connection per host, with the site's key and known_hosts
// file.
func (s *Site) runner(h *host) (*remote.SSH, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runner != nil {
		return h.runner, nil
	}
	name, port, err := net.SplitHostPort(h.addr)
	if err != nil {
		return nil, h.errorf("%w", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, h.errorf("port %q: %w", port, err)
	}
	r, err := remote.NewSSH(remote.SSHConfig{
		Host: name, Port: p, User: h.user, KeyFile: s.cfg.KeyFile, AgentSocket: s.cfg.AgentSocket,
		KnownHosts: s.cfg.KnownHosts, ConnectTimeout: s.cfg.ConnectTimeout, Name: "ssh host",
	})
	if err != nil {
		return nil, h.errorf("%w", err)
	}
	h.runner = r
	return r, nil
}

// close closes the host's connection, if any.
func (h *host) close() {
	h.mu.Lock()
	r := h.runner
	h.mu.Unlock()
	if r != nil {
		_ = r.Close()
	}
}

// maxStderr is the most bytes of a failed script's standard error an
// error shows.
const maxStderr = 4096

// run runs script with args on the host, with stdin as its standard
// input, and returns its standard output. A script that fails gives an
// *exitError; one whose connection went away while it ran an error
// wrapping remote.ErrLost.
func (s *Site) run(ctx context.Context, h *host, what, script string, stdin io.Reader, args ...string) ([]byte, error) {
	r, err := s.runner(h)
	if err != nil {
		return nil, err
	}
	stdout, stderr, err := r.Run(ctx, remote.Cmd{Path: "sh", Args: append([]string{"-c", script, "sh"}, args...), Stdin: stdin})
	var ee *remote.ExitError
	switch {
	case err == nil:
		return stdout, nil
	case errors.As(err, &ee):
		if len(stderr) > maxStderr {
			stderr = stderr[:maxStderr]
		}
		return stdout, &exitError{host: h.addr, what: what, status: ee.Status, stderr: strings.TrimSpace(string(stderr))}
	case ctx.Err() != nil:
		return nil, h.errorf("%s: %w", what, ctx.Err())
	case errors.Is(err, remote.ErrLost):
		return nil, h.errorf("%s: %w", what, err)
	}
	// Connecting failed: the error names the host already.
	return nil, err
}

// exitError is a script that failed on a host.
type exitError struct {
	host, what string
	status     int
	stderr     string
}

func (e *exitError) Error() string {
	msg := fmt.Sprintf("ssh host %s: %s: exit status %d", e.host, e.what, e.status)
	if e.stderr != "" {
		msg += ": " + e.stderr
	}
	return msg
}
