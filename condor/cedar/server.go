package cedar

import (
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/hkdf"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
)

// Identity is who an authentication method proved the peer to be, and
// what pond grants it.
type Identity struct {
	Method string // the method's name, "FS"
	User   string // the user name, "alice"
	Domain string // the domain the method vouches for
	// Claims are what the identity may do, checked with the same scopes as
	// pond's own routes. Nil grants nothing.
	Claims *auth.Claims
}

// FQU is the fully qualified user name HTCondor shows: user@domain.
func (id *Identity) FQU() string {
	if id.Domain == "" {
		return id.User
	}
	return id.User + "@" + id.Domain
}

// Method is an authentication method the server side of the handshake
// runs once the client has picked it. Authenticate exchanges the method's
// messages on s and returns the proven identity, or an error once the
// method has failed (having told the peer so, as the method's protocol
// says).
type Method interface {
	Name() string // as HTCondor's SEC_*_AUTHENTICATION_METHODS name it: "FS"
	Bit() int     // the method's bit in the handshake's method mask
	Authenticate(ctx context.Context, s *Stream) (*Identity, error)
}

// Bits of the handshake's method mask, as HTCondor numbers them.
const (
	BitClaimToBe = 2
	BitFS        = 4
	BitSSL       = 256
	BitToken     = 2048 // IDTOKENS
	BitSciTokens = 4096
)

// Request is one authorized command.
type Request struct {
	Command  int
	Stream   *Stream
	Identity *Identity
	Session  string // the session id
	Peer     net.Addr
	// Idle is how long a command that runs a session of many requests
	// (Command.Session) may wait for each of the client's messages; it
	// sets the stream's deadline itself before each wait.
	Idle time.Duration
}

// Command is what the server runs for one command number.
type Command struct {
	Name string
	// Need lists the scopes of which the identity must hold one (as
	// auth.RequireAny).
	Need []auth.Scope
	// Serve reads the rest of the request from req.Stream and answers.
	Serve func(ctx context.Context, req *Request) error
	// Session, when not zero, bounds the command, from the end of the
	// handshake, instead of Options.Timeout from the connection's start:
	// a command that runs a session of many requests (queue management:
	// a submit of 100,000 procs) may last this long, waiting at most
	// Request.Idle for each message.
	Session time.Duration
}

// Options configure a Server.
type Options struct {
	// Methods are the authentication methods offered, in the server's
	// order of preference. CLAIMTOBE and anonymous access are never
	// offered.
	Methods []Method
	// Commands maps command numbers to what serves them.
	Commands map[int]Command
	Limits   Limits
	// Timeout bounds each connection's handshake and command (default 60s).
	// A command with a Session of its own lasts up to that instead.
	Timeout time.Duration
	// SessionDuration bounds a session's life (default 1h); at most
	// MaxSessions (default 10000) are kept, the oldest dropped first.
	SessionDuration time.Duration
	MaxSessions     int
	Version         string // the $CondorVersion string the server shows
	Logger          *slog.Logger
}

// Server answers CEDAR connections: the DC_AUTHENTICATE handshake, then the
// command it carries. It is safe for concurrent use.
type Server struct {
	opts     Options
	mu       sync.Mutex
	sessions map[string]*session
}

type session struct {
	id      string
	key     []byte
	encrypt bool
	ident   *Identity
	expires time.Time
	created time.Time
}

// NewServer returns a server with opts.
func NewServer(opts Options) *Server {
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.SessionDuration <= 0 {
		opts.SessionDuration = time.Hour
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 10000
	}
	if opts.Version == "" {
		opts.Version = "$CondorVersion: 25.0.0 2025-01-01 BuildID: pond $"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{opts: opts, sessions: map[string]*session{}}
}

// ServeConn runs one connection to its end and closes it. r, when not nil,
// is read instead of conn (a listener that peeked passes its buffer).
func (srv *Server) ServeConn(ctx context.Context, conn net.Conn, r io.Reader) {
	defer conn.Close()
	s := NewStream(conn, r, srv.opts.Limits)
	_ = s.SetDeadline(time.Now().Add(srv.opts.Timeout))
	base, cancelBase := context.WithCancel(ctx)
	defer cancelBase()
	ctx, cancel := context.WithTimeout(context.WithValue(base, connCtxKey{}, base), srv.opts.Timeout)
	defer cancel()
	if err := srv.serve(ctx, s); err != nil && !errors.Is(err, io.EOF) {
		srv.opts.Logger.Warn("cedar connection refused", "peer", conn.RemoteAddr().String(), "err", err)
	}
}

// DCAuthenticate is the command that opens every authenticated exchange.
const DCAuthenticate = 60010

func (srv *Server) serve(ctx context.Context, s *Stream) error {
	cmd, err := s.GetInt32()
	if err != nil {
		return fmt.Errorf("reading the command: %w", err)
	}
	if cmd != DCAuthenticate {
		return fmt.Errorf("command %d without the DC_AUTHENTICATE handshake: unauthenticated commands are refused", cmd)
	}
	cli, err := s.GetAd()
	if err != nil {
		return fmt.Errorf("reading the client's security policy: %w", err)
	}
	if err := s.EndRead(); err != nil {
		return fmt.Errorf("reading the client's security policy: %w", err)
	}
	if strings.EqualFold(adString(cli, "UseSession"), "YES") {
		return srv.resume(ctx, s, cli)
	}
	return srv.newSession(ctx, s, cli)
}

func adString(ad *classad.Ad, name string) string {
	v, _ := ad.EvalAttr(name).StringValue()
	return v
}

func adInt(ad *classad.Ad, name string) (int64, bool) {
	v := ad.EvalAttr(name)
	if i, ok := v.IntValue(); ok {
		return i, true
	}
	if s, ok := v.StringValue(); ok {
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		return i, err == nil
	}
	return 0, false
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		out = append(out, strings.ToUpper(f))
	}
	return out
}

// policy is what the two sides settled on.
type policy struct {
	methods []Method
	encrypt bool
	command int
}

// negotiate reconciles the client's policy with the server's: the
// server requires authentication and a sealed stream (AES-GCM gives both
// integrity and secrecy), so a client that says NEVER to any of them, or
// shares no method with the server, is refused.
func (srv *Server) negotiate(cli *classad.Ad) (*policy, error) {
	p := &policy{}
	cmd, ok := adInt(cli, "Command")
	if !ok {
		return nil, errors.New("the client's policy names no command")
	}
	p.command = int(cmd)
	for _, lvl := range []string{"Authentication", "Integrity", "Encryption"} {
		if strings.EqualFold(adString(cli, lvl), "NEVER") {
			return nil, fmt.Errorf("the client sets %s to NEVER; this server requires it", lvl)
		}
	}
	offered := map[string]bool{}
	for _, m := range splitList(adString(cli, "AuthMethods")) {
		offered[m] = true
	}
	for _, m := range srv.opts.Methods {
		if offered[strings.ToUpper(m.Name())] {
			p.methods = append(p.methods, m)
		}
	}
	if len(p.methods) == 0 {
		return nil, fmt.Errorf("no authentication method in common: the client offers %q, this server %s",
			adString(cli, "AuthMethods"), srv.methodNames(srv.opts.Methods))
	}
	aes := false
	for _, c := range splitList(adString(cli, "CryptoMethods")) {
		aes = aes || c == "AES"
	}
	if !aes {
		return nil, fmt.Errorf("no crypto method in common: the client offers %q, this server AES", adString(cli, "CryptoMethods"))
	}
	p.encrypt = !strings.EqualFold(adString(cli, "Encryption"), "NEVER")
	return p, nil
}

func (srv *Server) methodNames(ms []Method) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name()
	}
	return strings.Join(names, ",")
}

func (srv *Server) newSession(ctx context.Context, s *Stream, cli *classad.Ad) error {
	p, err := srv.negotiate(cli)
	if err != nil {
		// Tell the client why in the policy it expects: no method in
		// common, so its authentication fails with our list in view.
		reply := classad.NewAd()
		reply.SetString("AuthMethods", srv.methodNames(srv.opts.Methods))
		reply.SetString("Authentication", "YES")
		reply.SetString("Enact", "YES")
		_ = s.PutAd(reply, nil)
		_ = s.EndMessage()
		return err
	}
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("ECDH key: %w", err)
	}
	peerKey, rawPoint, err := parseECDH(adString(cli, "ECDHPublicKey"))
	if err != nil {
		return fmt.Errorf("the client's ECDH public key: %w", err)
	}
	ours, err := encodeECDH(priv.PublicKey(), rawPoint)
	if err != nil {
		return err
	}
	yes := func(b bool) string {
		if b {
			return "YES"
		}
		return "NO"
	}
	reply := classad.NewAd()
	reply.SetString("AuthMethods", srv.methodNames(p.methods))
	reply.SetString("AuthMethodsList", srv.methodNames(p.methods))
	reply.SetString("CryptoMethods", "AES")
	reply.SetString("CryptoMethodsList", "AES")
	reply.SetString("Authentication", "YES")
	reply.SetString("Integrity", "YES")
	reply.SetString("Encryption", yes(p.encrypt))
	reply.SetString("Enact", "YES")
	reply.SetString("NewSession", "YES")
	reply.SetString("RemoteVersion", srv.opts.Version)
	reply.SetString("SessionDuration", strconv.Itoa(int(srv.opts.SessionDuration/time.Second)))
	reply.SetString("SessionLease", "3600")
	reply.SetString("ECDHPublicKey", ours)
	for _, m := range p.methods {
		if pm, ok := m.(PolicyMethod); ok {
			pm.Policy(reply)
		}
	}
	if !strings.EqualFold(adString(cli, "Enact"), "YES") {
		if err := s.PutAd(reply, nil); err != nil {
			return err
		}
		if err := s.EndMessage(); err != nil {
			return fmt.Errorf("sending the server's policy: %w", err)
		}
	}
	ident, err := srv.authenticate(ctx, s, p.methods)
	if err != nil {
		return err
	}
	shared, err := priv.ECDH(peerKey)
	if err != nil {
		return fmt.Errorf("ECDH: %w", err)
	}
	key := make([]byte, KeySize)
	if _, err := io.ReadFull(hkdf.New(sha256.New, shared, []byte("htcondor"), []byte("keygen")), key); err != nil {
		return fmt.Errorf("deriving the session key: %w", err)
	}
	if err := s.SetKey(key); err != nil {
		return err
	}
	s.SetCryptoMode(p.encrypt)
	sess := &session{id: newSessionID(), key: key, encrypt: p.encrypt, ident: ident, created: time.Now(),
		expires: time.Now().Add(srv.opts.SessionDuration)}
	cmd, ok := srv.opts.Commands[p.command]
	post := classad.NewAd()
	post.SetString("Sid", sess.id)
	post.SetString("User", ident.FQU())
	// A client that resumes the session knows from this that it was
	// authenticated, and does not authenticate again in band (as
	// queue management otherwise does).
	post.SetBool("TriedAuthentication", true)
	post.SetString("ValidCommands", srv.validCommands(ident))
	post.SetString("RemoteVersion", srv.opts.Version)
	post.SetString("SessionDuration", strconv.Itoa(int(srv.opts.SessionDuration/time.Second)))
	post.SetString("SessionLease", "3600")
	// A handshake for DC_AUTHENTICATE itself only sets up the session
	// the client's next commands resume.
	sessionOnly := p.command == DCAuthenticate
	allowed := sessionOnly || ok && allows(ident, cmd.Need)
	if allowed {
		post.SetString("ReturnCode", "AUTHORIZED")
	} else {
		post.SetString("ReturnCode", "DENIED")
	}
	// The session is stored before the client learns its id: a client
	// resumes it on its next connection as soon as it has read this ad.
	srv.store(sess)
	if err := s.PutAd(post, nil); err != nil {
		srv.forget(sess.id)
		return err
	}
	if err := s.EndMessage(); err != nil {
		srv.forget(sess.id)
		return fmt.Errorf("sending the session: %w", err)
	}
	if sessionOnly {
		return nil
	}
	if !ok {
		return fmt.Errorf("command %d is not served here", p.command)
	}
	if !allowed {
		return fmt.Errorf("%s may not run %s", ident.FQU(), cmd.Name)
	}
	return srv.dispatch(ctx, s, p.command, cmd, sess)
}

func allows(id *Identity, need []auth.Scope) bool {
	if id == nil || id.Claims == nil {
		return false
	}
	for _, n := range need {
		if id.Claims.Allows(n) {
			return true
		}
	}
	return false
}

func (srv *Server) validCommands(id *Identity) string {
	var nums []int
	for n, c := range srv.opts.Commands {
		if allows(id, c.Need) {
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	parts := make([]string, len(nums))
	for i, n := range nums {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// connCtxKey keys the connection's context, unbounded by Timeout, in
// the context the handshake runs under.
type connCtxKey struct{}

func (srv *Server) dispatch(ctx context.Context, s *Stream, num int, cmd Command, sess *session) error {
	req := &Request{Command: num, Stream: s, Identity: sess.ident, Session: sess.id, Peer: s.Conn().RemoteAddr(),
		Idle: srv.opts.Timeout}
	if base, ok := ctx.Value(connCtxKey{}).(context.Context); ok && cmd.Session > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(base, cmd.Session)
		defer cancel()
		_ = s.SetDeadline(time.Now().Add(srv.opts.Timeout))
	}
	if err := cmd.Serve(ctx, req); err != nil {
		return fmt.Errorf("%s for %s: %w", cmd.Name, sess.ident.FQU(), err)
	}
	return nil
}

// authenticate runs the method-mask exchange: the client sends the mask
// of methods it will try, the server answers with the one it picks (or 0),
// the method runs; a failed method leaves the client to send a smaller
// mask. Each method is tried at most once.
func (srv *Server) authenticate(ctx context.Context, s *Stream, methods []Method) (*Identity, error) {
	tried := map[int]bool{}
	var errs []error
	for range len(methods) + 1 {
		mask, err := s.GetInt()
		if err != nil {
			return nil, fmt.Errorf("reading the client's method mask: %w", err)
		}
		if err := s.EndRead(); err != nil {
			return nil, err
		}
		var pick Method
		for _, m := range methods {
			if mask&int64(m.Bit()) != 0 && !tried[m.Bit()] {
				pick = m
				break
			}
		}
		bit := 0
		if pick != nil {
			bit = pick.Bit()
		}
		if err := s.PutInt(int64(bit)); err != nil {
			return nil, err
		}
		if err := s.EndMessage(); err != nil {
			return nil, err
		}
		if pick == nil {
			errs = append(errs, fmt.Errorf("no method in the client's mask %#x", mask))
			return nil, fmt.Errorf("authentication failed: %w", errors.Join(errs...))
		}
		tried[bit] = true
		id, err := pick.Authenticate(ctx, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", pick.Name(), err))
			continue
		}
		if id.Method == "" {
			id.Method = pick.Name()
		}
		// The key comes from ECDH, so the server sends no key of its own.
		if err := s.PutInt(0); err != nil {
			return nil, err
		}
		if err := s.EndMessage(); err != nil {
			return nil, err
		}
		return id, nil
	}
	return nil, fmt.Errorf("authentication failed: %w", errors.Join(errs...))
}

// resume serves a command on a session an earlier handshake set up.
func (srv *Server) resume(ctx context.Context, s *Stream, cli *classad.Ad) error {
	sid := adString(cli, "Sid")
	sess := srv.lookup(sid)
	wantReply, _ := cli.EvalAttr("ResumeResponse").BoolValue()
	if sess == nil {
		if wantReply {
			reply := classad.NewAd()
			reply.SetString("ReturnCode", "SID_NOT_FOUND")
			_ = s.PutAd(reply, nil)
			_ = s.EndMessage()
		}
		return fmt.Errorf("unknown or expired session %q", clip(sid))
	}
	num, ok := adInt(cli, "Command")
	if !ok {
		return errors.New("session resumption names no command")
	}
	cmd, known := srv.opts.Commands[int(num)]
	allowed := known && allows(sess.ident, cmd.Need)
	if wantReply {
		reply := classad.NewAd()
		if allowed {
			reply.SetString("ReturnCode", "AUTHORIZED")
		} else {
			reply.SetString("ReturnCode", "DENIED")
		}
		reply.SetString("Sid", sess.id)
		if err := s.PutAd(reply, nil); err != nil {
			return err
		}
		if err := s.EndMessage(); err != nil {
			return err
		}
	}
	if !known {
		return fmt.Errorf("command %d is not served here", num)
	}
	if !allowed {
		return fmt.Errorf("%s may not run %s", sess.ident.FQU(), cmd.Name)
	}
	if err := s.SetKey(sess.key); err != nil {
		return err
	}
	s.SetCryptoMode(sess.encrypt)
	return srv.dispatch(ctx, s, int(num), cmd, sess)
}

func clip(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "pond:" + hex.EncodeToString(b[:])
}

func (srv *Server) store(sess *session) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	now := time.Now()
	for id, old := range srv.sessions {
		if now.After(old.expires) {
			delete(srv.sessions, id)
		}
	}
	for len(srv.sessions) >= srv.opts.MaxSessions {
		var oldest *session
		for _, old := range srv.sessions {
			if oldest == nil || old.created.Before(oldest.created) {
				oldest = old
			}
		}
		delete(srv.sessions, oldest.id)
	}
	srv.sessions[sess.id] = sess
}

// forget drops the session id, which its client never learned.
func (srv *Server) forget(id string) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	delete(srv.sessions, id)
}

func (srv *Server) lookup(id string) *session {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	sess := srv.sessions[id]
	if sess == nil || time.Now().After(sess.expires) {
		delete(srv.sessions, id)
		return nil
	}
	return sess
}

// Sessions returns how many sessions the server keeps.
func (srv *Server) Sessions() int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return len(srv.sessions)
}

// parseECDH reads a peer's P-256 public key, base64 of either the raw
// uncompressed point or a DER SubjectPublicKeyInfo, and says which.
func parseECDH(b64 string) (*ecdh.PublicKey, bool, error) {
	if b64 == "" {
		return nil, false, errors.New("missing")
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, false, err
	}
	if len(raw) == 65 && raw[0] == 4 {
		k, err := ecdh.P256().NewPublicKey(raw)
		return k, true, err
	}
	pub, err := x509.ParsePKIXPublicKey(raw)
	if err != nil {
		return nil, false, err
	}
	ek, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return nil, false, errors.New("not an elliptic-curve key")
	}
	k, err := ek.ECDH()
	if err != nil {
		return nil, false, err
	}
	if k.Curve() != ecdh.P256() {
		return nil, false, errors.New("not a P-256 key")
	}
	return k, false, nil
}

func encodeECDH(k *ecdh.PublicKey, raw bool) (string, error) {
	if raw {
		return base64.StdEncoding.EncodeToString(k.Bytes()), nil
	}
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return "", fmt.Errorf("encoding the ECDH key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(der), nil
}
