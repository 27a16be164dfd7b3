package remote

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHConfig is a login node reached over SSH.
type SSHConfig struct {
	// Host is the login node's name or address; required.
	Host string
	// Port is its SSH port; default 22.
	Port int
	// User logs in; required.
	User string
	// KeyFile is the private key to log in with (OpenSSH or PEM format,
	// without a passphrase). Empty: the keys of the SSH agent at
	// AgentSocket.
	KeyFile string
	// AgentSocket is the SSH agent's socket, used when KeyFile is empty;
	// $SSH_AUTH_SOCK by default.
	AgentSocket string
	// KnownHosts is the known_hosts file the login node's key (and the
	// jump host's) is checked against; required. An unknown host or a
	// changed key is refused.
	KnownHosts string
	// Jump is a host the connection goes through, as [USER@]HOST[:PORT]
	// (User and port 22 by default; an IPv6 address in brackets), with
	// the same key; empty for none.
	Jump string
	// ConnectTimeout bounds making the connection, handshakes included;
	// default 15 s.
	ConnectTimeout time.Duration
	// Name is what the host is called in messages: "login node" by
	// default, "ssh host" for a host of the SSH site.
	Name string
}

// maxSessions bounds the sessions opened at once on the connection,
// below OpenSSH's default MaxSessions of 10.
const maxSessions = 8

// maxStderr is the most bytes of a command's standard error kept.
const maxStderr = 64 << 10

// SSH runs commands on a login node, each in a session of one SSH
// connection, made when first needed and made again when it was lost.
type SSH struct {
	cfg      SSHConfig
	addr     string // HOST:PORT
	jumpUser string
	jumpAddr string
	signer   xssh.Signer
	known    xssh.HostKeyCallback
	probeKey xssh.PublicKey
	sess     chan struct{}

	mu     sync.Mutex
	client *xssh.Client
	jump   *xssh.Client
}

var _ Runner = (*SSH)(nil)

// NewSSH checks cfg, reads the key and the known_hosts file, and returns
// the runner. It connects to nothing: Run does.
func NewSSH(cfg SSHConfig) (*SSH, error) {
	if cfg.Host == "" {
		return nil, errors.New("host is required")
	}
	if !validHostName(cfg.Host) {
		return nil, fmt.Errorf("host %q is not a host name or address", cfg.Host)
	}
	if cfg.Port == 0 {
		cfg.Port = 22
	}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, fmt.Errorf("port %d is not from 1 to 65535", cfg.Port)
	}
	if cfg.User == "" {
		return nil, errors.New("user is required")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 15 * time.Second
	}
	if cfg.Name == "" {
		cfg.Name = "login node"
	}
	if cfg.ConnectTimeout < 0 {
		return nil, fmt.Errorf("connect timeout %v is negative", cfg.ConnectTimeout)
	}
	s := &SSH{cfg: cfg, addr: net.JoinHostPort(strings.Trim(cfg.Host, "[]"), strconv.Itoa(cfg.Port)), sess: make(chan struct{}, maxSessions)}
	if cfg.Jump != "" {
		u, a, err := ParseHost(cfg.Jump)
		if err != nil {
			return nil, fmt.Errorf("jump_host: %w", err)
		}
		if u == "" {
			u = cfg.User
		}
		s.jumpUser, s.jumpAddr = u, a
	}
	if cfg.KnownHosts == "" {
		return nil, errors.New("known_hosts_file is required: a login node is never trusted on first use")
	}
	known, err := knownhosts.New(cfg.KnownHosts)
	if errors.Is(err, os.ErrNotExist) {
		// Nothing on the site can be reached without it: not even to
		// cancel what runs there.
		return nil, fmt.Errorf("known_hosts_file %s does not exist: the %s's host key cannot be checked without it; restore the file, or set known_hosts_file to one that holds the %s's key (from ssh-keyscan -p %d %s, checked out of band)",
			cfg.KnownHosts, cfg.Name, cfg.Name, cfg.Port, cfg.Host)
	}
	if err != nil {
		return nil, fmt.Errorf("known_hosts_file: %w", err)
	}
	s.known = known
	if cfg.KeyFile != "" {
		pem, err := os.ReadFile(cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("private_key_file: %w", err)
		}
		s.signer, err = xssh.ParsePrivateKey(pem)
		var pm *xssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Errorf("private_key_file %s is protected by a passphrase: load it into an SSH agent and leave private_key_file unset", cfg.KeyFile)
		}
		if err != nil {
			return nil, fmt.Errorf("private_key_file %s: %w", cfg.KeyFile, err)
		}
	} else {
		if s.cfg.AgentSocket == "" {
			s.cfg.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
		}
		if s.cfg.AgentSocket == "" {
			return nil, errors.New("no private_key_file, and no SSH agent (SSH_AUTH_SOCK is not set)")
		}
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	probe, err := xssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	s.probeKey = probe.PublicKey()
	return s, nil
}

// Where implements Runner.
func (s *SSH) Where() string { return s.cfg.Name + " " + s.cfg.User + "@" + s.addr }

// Close implements Runner: it closes the connection.
func (s *SSH) Close() error {
	s.mu.Lock()
	c, j := s.client, s.jump
	s.client, s.jump = nil, nil
	s.mu.Unlock()
	var errs []error
	if c != nil {
		errs = append(errs, c.Close())
	}
	if j != nil {
		errs = append(errs, j.Close())
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
	}
	return nil
}

// Run implements Runner: one session of the connection.
func (s *SSH) Run(ctx context.Context, c Cmd) ([]byte, []byte, error) {
	select {
	case s.sess <- struct{}{}:
		defer func() { <-s.sess }()
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("%s: %w", s.Where(), ctx.Err())
	}
	var sess *xssh.Session
	for attempt := 0; ; attempt++ {
		client, err := s.connect(ctx)
		if err != nil {
			return nil, nil, err
		}
		sess, err = s.newSession(ctx, client)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.Where(), ctx.Err())
		}
		// A connection that went away since it was last used: once more
		// with a new one. Nothing ran.
		s.drop(client)
		if attempt == 1 {
			return nil, nil, fmt.Errorf("%s: %w: %w", s.Where(), ErrUnreachable, err)
		}
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdout, sess.Stderr = &stdout, &limited{w: &stderr, n: maxStderr}
	if c.Stdin != nil {
		sess.Stdin = c.Stdin
	}
	done := make(chan error, 1)
	go func() { done <- sess.Run(CommandLine(c)) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = sess.Close()
		<-done
		return nil, nil, fmt.Errorf("%s: %w (%w)", s.Where(), ctx.Err(), ErrLost)
	}
	var ee *xssh.ExitError
	switch {
	case err == nil:
		return stdout.Bytes(), stderr.Bytes(), nil
	case errors.As(err, &ee) && ee.Signal() == "":
		return stdout.Bytes(), stderr.Bytes(), &ExitError{Status: ee.ExitStatus(), NotFound: ee.ExitStatus() == 127,
			err: fmt.Errorf("%s: exit status %d", s.Where(), ee.ExitStatus())}
	case errors.As(err, &ee):
		return stdout.Bytes(), stderr.Bytes(), &ExitError{Status: -1, err: fmt.Errorf("%s: killed by signal %s", s.Where(), ee.Signal())}
	}
	// No exit status: the connection, or the session's server side,
	// went away meanwhile.
	s.dropIfDead()
	return stdout.Bytes(), stderr.Bytes(), fmt.Errorf("%s: %w: %w", s.Where(), ErrLost, err)
}

// connect returns the connection, making one if there is none.
func (s *SSH) connect(ctx context.Context) (*xssh.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	if s.jumpAddr != "" {
		if s.jump == nil {
			raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.jumpAddr)
			if err != nil {
				return nil, fmt.Errorf("jump host %s: %w: %w", s.jumpAddr, ErrUnreachable, err)
			}
			j, err := s.handshake(ctx, raw, s.jumpAddr, s.jumpUser, "jump host")
			if err != nil {
				return nil, err
			}
			s.jump = j
		}
		conn, err = s.jump.DialContext(ctx, "tcp", s.addr)
		if err != nil {
			_ = s.jump.Close()
			s.jump = nil
			return nil, fmt.Errorf("%s %s through jump host %s: %w: %w", s.cfg.Name, s.addr, s.jumpAddr, ErrUnreachable, err)
		}
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", s.addr)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w: %w", s.cfg.Name, s.addr, ErrUnreachable, err)
		}
	}
	c, err := s.handshake(ctx, conn, s.addr, s.cfg.User, s.cfg.Name)
	if err != nil {
		return nil, err
	}
	s.client = c
	stop := make(chan struct{})
	go func() {
		_ = c.Wait()
		close(stop)
		s.mu.Lock()
		if s.client == c {
			s.client = nil
		}
		s.mu.Unlock()
	}()
	go s.keepalive(c, stop)
	return c, nil
}

// keepaliveEvery is how often a connection is asked whether it still
// answers; one that does not within keepaliveEvery is closed, which ends
// its sessions' commands with ErrLost rather than leave them waiting on a
// peer gone silent (a network cut sends nothing).
const keepaliveEvery = 15 * time.Second

// keepalive closes c when it stops answering, until stop is closed.
func (s *SSH) keepalive(c *xssh.Client, stop <-chan struct{}) {
	t := time.NewTicker(keepaliveEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		answered := make(chan struct{})
		go func() {
			_, _, _ = c.SendRequest("keepalive@openssh.com", true, nil)
			close(answered)
		}()
		select {
		case <-stop:
			return
		case <-answered:
		case <-time.After(keepaliveEvery):
			s.drop(c)
			return
		}
	}
}

// handshake makes the SSH connection over conn to addr as user, checking
// the host's key.
func (s *SSH) handshake(ctx context.Context, conn net.Conn, addr, user, what string) (*xssh.Client, error) {
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	auth, closeAuth, err := s.authMethods()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s %s: %w", what, addr, err)
	}
	defer closeAuth()
	cfg := &xssh.ClientConfig{
		User:              user,
		Auth:              auth,
		HostKeyCallback:   s.checkHostKey,
		HostKeyAlgorithms: s.hostKeyAlgorithms(addr, conn.RemoteAddr()),
		Timeout:           s.cfg.ConnectTimeout,
	}
	cc, chans, reqs, err := xssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		switch {
		case errors.Is(err, ErrUnknownHost), errors.Is(err, ErrHostKeyChanged):
			return nil, fmt.Errorf("%s %s: %w", what, addr, err)
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, fmt.Errorf("%s %s: %w: user %s with %s: %w", what, addr, ErrKeyRejected, user, s.authName(), err)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s %s: %w: no SSH handshake within %s: %w", what, addr, ErrUnreachable, s.cfg.ConnectTimeout, err)
		}
		return nil, fmt.Errorf("%s %s: %w: %w", what, addr, ErrUnreachable, err)
	}
	if !stop() {
		cc.Close()
		return nil, fmt.Errorf("%s %s: %w: no SSH handshake within %s", what, addr, ErrUnreachable, s.cfg.ConnectTimeout)
	}
	_ = conn.SetDeadline(time.Time{})
	return xssh.NewClient(cc, chans, reqs), nil
}

// drop forgets the connection c, closing it.
func (s *SSH) drop(c *xssh.Client) {
	s.mu.Lock()
	if s.client == c {
		s.client = nil
	}
	s.mu.Unlock()
	_ = c.Close()
}

// dropIfDead forgets the connection when it no longer answers a
// keepalive within a few seconds.
func (s *SSH) dropIfDead() {
	s.mu.Lock()
	c := s.client
	s.mu.Unlock()
	if c == nil {
		return
	}
	ok := make(chan bool, 1)
	go func() {
		_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
		ok <- err == nil
	}()
	select {
	case alive := <-ok:
		if alive {
			return
		}
	case <-time.After(5 * time.Second):
	}
	s.drop(c)
}

// newSession opens a session on c, giving up when the host does not
// answer within the connect timeout or ctx ends.
func (s *SSH) newSession(ctx context.Context, c *xssh.Client) (*xssh.Session, error) {
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

// authName says which key the runner logs in with.
func (s *SSH) authName() string {
	if s.cfg.KeyFile != "" {
		return "key " + s.cfg.KeyFile
	}
	return "the keys of the agent at " + s.cfg.AgentSocket
}

// authMethods returns the key to log in with: the key file's, or the
// agent's; the returned function closes the connection to the agent.
func (s *SSH) authMethods() ([]xssh.AuthMethod, func(), error) {
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

// checkHostKey checks a host's key against the known_hosts file, and
// says which of unknown or changed a refused key is.
func (s *SSH) checkHostKey(hostname string, remote net.Addr, key xssh.PublicKey) error {
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
// for the host, so that it presents one of those rather than the first
// it prefers; nil (the default list) for an unknown host.
func (s *SSH) hostKeyAlgorithms(hostname string, remote net.Addr) []string {
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

// ParseHost reads [USER@]HOST[:PORT] and returns its user (empty when it
// names none) and HOST:PORT, port 22 by default. HOST is a name, an IPv4
// address, or an IPv6 address in brackets.
func ParseHost(entry string) (user, addr string, err error) {
	bad := func(format string, a ...any) (string, string, error) {
		return "", "", fmt.Errorf("host %q: %s", entry, fmt.Sprintf(format, a...))
	}
	if strings.TrimSpace(entry) == "" {
		return "", "", errors.New("empty host")
	}
	hp := entry
	if u, rest, ok := strings.Cut(entry, "@"); ok {
		if u == "" || strings.HasPrefix(u, "-") || strings.ContainsAny(u, " \t\n\x00/:@'\"\\") {
			return bad("user %q is not a user name", u)
		}
		user, hp = u, rest
	}
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		var ae *net.AddrError
		if !errors.As(err, &ae) || ae.Err != "missing port in address" {
			return bad("%v", err)
		}
		h, p = strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]"), "22"
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n < 1 {
		return bad("port %q is not a number from 1 to 65535", p)
	}
	if h == "" || !validHostName(h) {
		return bad("%q is not a host name or address", h)
	}
	return user, net.JoinHostPort(h, strconv.FormatUint(n, 10)), nil
}

// validHostName reports whether h may be a host name or an address:
// printable ASCII without spaces, '/', '@', quotes or shell punctuation,
// and ':' only in an IPv6 address.
func validHostName(h string) bool {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if h == "" || strings.HasPrefix(h, "-") {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("/@[]\\'\"`$;&|<>(){}*?!#,", c) >= 0 {
			return false
		}
	}
	if strings.Contains(h, ":") {
		return net.ParseIP(strings.SplitN(h, "%", 2)[0]) != nil
	}
	return true
}
