package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Errors a connection to a host fails with, wrapped with the host's name.
var (
	// ErrUnknownHost: the host's key is not in the known_hosts file.
	ErrUnknownHost = errors.New("host key unknown")
	// ErrHostKeyChanged: the host presented a key other than the one
	// the known_hosts file has for it, which may be an attack.
	ErrHostKeyChanged = errors.New("host key changed")
	// ErrKeyRejected: the host refused every key the site offered.
	ErrKeyRejected = errors.New("key rejected")
	// ErrUnreachable: no SSH connection could be made to the host.
	ErrUnreachable = errors.New("host unreachable")
)

// maxSessions bounds the sessions the site opens at once on one
// connection, below OpenSSH's default MaxSessions of 10.
const maxSessions = 8

// host is one configured host and the site's connection to it.
type host struct {
	// addr is HOST:PORT, the host as configured, with its port: what
	// the host is known by.
	addr string
	// user logs in on the host: its entry's, else Config.User.
	user string
	// key names the host's directory under BASE/hosts.
	key  string
	sess chan struct{}

	mu     sync.Mutex
	client *xssh.Client
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

// connect returns the connection to the host, making one if it has none.
func (s *Site) connect(ctx context.Context, h *host) (*xssh.Client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.client != nil {
		return h.client, nil
	}
	c, err := s.dial(ctx, h)
	if err != nil {
		return nil, err
	}
	h.client = c
	go func() {
		_ = c.Wait()
		h.mu.Lock()
		if h.client == c {
			h.client = nil
		}
		h.mu.Unlock()
	}()
	return c, nil
}

// drop forgets the connection c of the host, closing it.
func (h *host) drop(c *xssh.Client) {
	h.mu.Lock()
	if h.client == c {
		h.client = nil
	}
	h.mu.Unlock()
	_ = c.Close()
}

func (s *Site) dial(ctx context.Context, h *host) (*xssh.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
	defer cancel()
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", h.addr)
	if err != nil {
		return nil, h.errorf("%w: %w", ErrUnreachable, err)
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	auth, closeAuth, err := s.authMethods()
	if err != nil {
		conn.Close()
		return nil, h.errorf("%w", err)
	}
	defer closeAuth()
	cfg := &xssh.ClientConfig{
		User:              h.user,
		Auth:              auth,
		HostKeyCallback:   s.checkHostKey,
		HostKeyAlgorithms: s.hostKeyAlgorithms(h.addr, conn.RemoteAddr()),
		Timeout:           s.cfg.ConnectTimeout,
	}
	cc, chans, reqs, err := xssh.NewClientConn(conn, h.addr, cfg)
	if err != nil {
		conn.Close()
		switch {
		case errors.Is(err, ErrUnknownHost), errors.Is(err, ErrHostKeyChanged):
			return nil, h.errorf("%w", err)
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, h.errorf("%w: user %s with %s: %w", ErrKeyRejected, h.user, s.authName(), err)
		case ctx.Err() != nil:
			return nil, h.errorf("%w: no SSH handshake within %s: %w", ErrUnreachable, s.cfg.ConnectTimeout, err)
		}
		return nil, h.errorf("%w: %w", ErrUnreachable, err)
	}
	if !stop() {
		// The timeout struck as the handshake ended: the deadline it set
		// would break the connection.
		cc.Close()
		return nil, h.errorf("%w: no SSH handshake within %s", ErrUnreachable, s.cfg.ConnectTimeout)
	}
	_ = conn.SetDeadline(time.Time{})
	return xssh.NewClient(cc, chans, reqs), nil
}

// authName says which key the site logs in with.
func (s *Site) authName() string {
	if s.cfg.KeyFile != "" {
		return "key " + s.cfg.KeyFile
	}
	return "the keys of the agent at " + s.cfg.AgentSocket
}

// authMethods returns the key to log in with: the key file's, or the
// agent's; the returned function closes the connection to the agent.
func (s *Site) authMethods() ([]xssh.AuthMethod, func(), error) {
	if s.signer != nil {
		return []xssh.AuthMethod{xssh.PublicKeys(s.signer)}, func() {}, nil
	}
	conn, err := net.Dial("unix", s.cfg.AgentSocket)
	if err != nil {
		return nil, nil, fmt.Errorf("SSH agent at %s: %w", s.cfg.AgentSocket, err)
	}
	ag := agent.NewClient(conn)
	return []xssh.AuthMethod{xssh.PublicKeysCallback(ag.Signers)}, func() { conn.Close() }, nil
}

// checkHostKey checks the host's key against the known_hosts file, and
// says which of unknown or changed a refused key is.
func (s *Site) checkHostKey(hostname string, remote net.Addr, key xssh.PublicKey) error {
	err := s.known(hostname, remote, key)
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return fmt.Errorf("%w: its %s key %s is not in %s (add it, after checking it, with ssh-keyscan)",
			ErrUnknownHost, key.Type(), xssh.FingerprintSHA256(key), s.cfg.KnownHosts)
	case errors.As(err, &ke):
		w := ke.Want[0]
		return fmt.Errorf("%w: it presented the %s key %s, but %s line %d has %s %s for it",
			ErrHostKeyChanged, key.Type(), xssh.FingerprintSHA256(key), w.Filename, w.Line, w.Key.Type(), xssh.FingerprintSHA256(w.Key))
	case errors.As(err, &re):
		return fmt.Errorf("%w: its key %s is revoked in %s line %d", ErrHostKeyChanged, xssh.FingerprintSHA256(key), re.Revoked.Filename, re.Revoked.Line)
	}
	return fmt.Errorf("host key of %s: %w", hostname, err)
}

// hostKeyAlgorithms returns the algorithms of the keys known_hosts has
// for the host, so that the host presents one of those rather than the
// first it prefers; nil (the default list) for an unknown host.
func (s *Site) hostKeyAlgorithms(hostname string, remote net.Addr) []string {
	var ke *knownhosts.KeyError
	if err := s.known(hostname, remote, s.probeKey); !errors.As(err, &ke) {
		return nil
	}
	var algos []string
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case xssh.KeyAlgoRSA:
			algos = append(algos, xssh.KeyAlgoRSASHA512, xssh.KeyAlgoRSASHA256, xssh.KeyAlgoRSA)
		default:
			algos = append(algos, t)
		}
	}
	return algos
}

// run runs script with args on the host, with stdin as its standard
// input, and returns its standard output. A script that fails gives an
// *exitError.
func (s *Site) run(ctx context.Context, h *host, what, script string, stdin io.Reader, args ...string) ([]byte, error) {
	select {
	case h.sess <- struct{}{}:
		defer func() { <-h.sess }()
	case <-ctx.Done():
		return nil, h.errorf("%s: %w", what, ctx.Err())
	}
	var sess *xssh.Session
	for attempt := 0; ; attempt++ {
		c, err := s.connect(ctx, h)
		if err != nil {
			return nil, err
		}
		sess, err = s.newSession(ctx, c)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, h.errorf("%s: %w", what, ctx.Err())
		}
		// A connection that went away since it was last used, or that no
		// longer answers: once more with a new one.
		h.drop(c)
		if attempt == 1 {
			return nil, h.errorf("%s: %w: %w", what, ErrUnreachable, err)
		}
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdout, sess.Stderr = &stdout, &limited{w: &stderr, n: 4096}
	if stdin != nil {
		sess.Stdin = stdin
	}
	done := make(chan error, 1)
	go func() { done <- sess.Run(command(script, args...)) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = sess.Close()
		<-done
		return nil, h.errorf("%s: %w", what, ctx.Err())
	}
	var ee *xssh.ExitError
	switch {
	case err == nil:
		return stdout.Bytes(), nil
	case errors.As(err, &ee):
		return stdout.Bytes(), &exitError{host: h.addr, what: what, status: ee.ExitStatus(), stderr: strings.TrimSpace(stderr.String())}
	}
	return nil, h.errorf("%s: %w", what, err)
}

// newSession opens a session on c, giving up when the host does not
// answer within the connect timeout (a host gone without closing the
// connection) or ctx ends.
func (s *Site) newSession(ctx context.Context, c *xssh.Client) (*xssh.Session, error) {
	type opened struct {
		sess *xssh.Session
		err  error
	}
	ch := make(chan opened, 1)
	go func() {
		sess, err := c.NewSession()
		ch <- opened{sess, err}
	}()
	abandon := func() {
		go func() {
			if o := <-ch; o.sess != nil {
				o.sess.Close()
			}
		}()
	}
	t := time.NewTimer(s.cfg.ConnectTimeout)
	defer t.Stop()
	select {
	case o := <-ch:
		return o.sess, o.err
	case <-t.C:
		abandon()
		return nil, fmt.Errorf("no session opened within %s", s.cfg.ConnectTimeout)
	case <-ctx.Done():
		abandon()
		return nil, ctx.Err()
	}
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

// limited writes the first n bytes written to it to w.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.n > 0 {
		q := p
		if len(q) > l.n {
			q = q[:l.n]
		}
		l.n -= len(q)
		_, _ = l.w.Write(q)
	}
	return len(p), nil
}
