package tree

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pond-htc/pond/overlay/ring"
)

// DefaultMaxFrame bounds the size of one TCP message.
const DefaultMaxFrame = 4 << 20

// TCPConfig configures a TCPTransport.
type TCPConfig struct {
	// MaxFrame bounds the encoded size of one message in bytes
	// (default DefaultMaxFrame). Larger frames are refused on both ends.
	MaxFrame int
	// DialTimeout bounds connection set-up (default 2s, and never past
	// the request's deadline).
	DialTimeout time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
	// ServerTLS, when set, makes the transport serve only mutual TLS:
	// a peer must present a certificate, which ServerTLS must verify
	// (condor/auth.ServerTLS verifies it against the sea's CA). A peer
	// without one cannot send queries.
	ServerTLS *tls.Config
	// ClientTLS, when set, makes the transport send requests only over
	// TLS, to peers it verifies (condor/auth.ClientTLS, with the node's
	// certificate): a peer without a certificate of the sea gets no
	// request.
	ClientTLS *tls.Config
}

// tlsHandshakeTimeout bounds a served connection's TLS handshake.
const tlsHandshakeTimeout = 5 * time.Second

// TCPTransport carries tree requests over TCP. Each message is a frame: a
// 4-byte big-endian length followed by that many bytes of body, in the
// compact binary format of wire.go (JSON bodies are accepted too). One
// connection per peer is kept and multiplexed by request number; requests
// not answered by their deadline fail with ErrTimeout. The zero value is
// not usable; call NewTCPTransport.
type TCPTransport struct {
	cfg TCPConfig
	ids atomic.Uint64

	mu      sync.Mutex
	closed  bool
	ln      net.Listener
	conns   map[string]*clientConn
	served  map[net.Conn]struct{}
	handler Handler
	wg      sync.WaitGroup
}

// NewTCPTransport returns a transport that can send at once and serve
// after Listen.
func NewTCPTransport(cfg TCPConfig) *TCPTransport {
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ServerTLS != nil {
		cfg.ServerTLS = cfg.ServerTLS.Clone()
		cfg.ServerTLS.ClientAuth = tls.RequireAnyClientCert
	}
	return &TCPTransport{cfg: cfg, conns: map[string]*clientConn{}, served: map[net.Conn]struct{}{}}
}

// envelope is the body of a frame.
type envelope struct {
	ID   uint64    `json:"id"`
	Req  *Request  `json:"req,omitempty"`
	Resp *Response `json:"resp,omitempty"`
	Err  string    `json:"err,omitempty"`
	// json is set on envelopes read from, or to be written as, JSON.
	json bool
}

// JSONAddr marks the tree address of a peer that reads only JSON frames
// (protocol version 1): a request to JSONAddr(addr) goes to addr as JSON.
// Every node answers a request in the format it came in.
func JSONAddr(addr string) string { return jsonScheme + addr }

const jsonScheme = "json+"

// Listen accepts connections on addr ("host:port", port 0 picks one) and
// passes requests to h. It returns the address actually bound, to be
// advertised to peers.
func (t *TCPTransport) Listen(addr string, h Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("tree transport: listen on %s: %w", addr, err)
	}
	return t.Serve(ln, h)
}

// Serve accepts connections on ln, which the transport then owns, and
// passes requests to h. It returns ln's address.
func (t *TCPTransport) Serve(ln net.Listener, h Handler) (string, error) {
	t.mu.Lock()
	if t.closed || t.ln != nil {
		t.mu.Unlock()
		ln.Close()
		return "", errors.New("tree transport: already listening or closed")
	}
	t.ln, t.handler = ln, h
	t.wg.Add(1)
	t.mu.Unlock()
	go t.accept(ln)
	return ln.Addr().String(), nil
}

// Addr returns the listening address, or "" before Listen.
func (t *TCPTransport) Addr() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ln == nil {
		return ""
	}
	return t.ln.Addr().String()
}

// Close stops listening, closes every connection, fails pending requests
// and waits for the transport's goroutines.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	var err error
	if t.ln != nil {
		err = t.ln.Close()
	}
	for c := range t.served {
		c.Close()
	}
	conns := t.conns
	t.conns = map[string]*clientConn{}
	t.mu.Unlock()
	for _, c := range conns {
		c.fail(errors.New("tree transport: closed"))
	}
	t.wg.Wait()
	return err
}

func (t *TCPTransport) accept(ln net.Listener) {
	defer t.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.served[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serveConn(c)
	}
}

func (t *TCPTransport) serveConn(raw net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.served, raw)
		t.mu.Unlock()
		raw.Close()
	}()
	c := raw
	if t.cfg.ServerTLS != nil {
		tc := tls.Server(raw, t.cfg.ServerTLS)
		raw.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
		if err := tc.Handshake(); err != nil {
			t.cfg.Logger.Warn("tree transport: refused a peer that did not prove it belongs to the sea", "peer", raw.RemoteAddr().String(), "err", err)
			return
		}
		raw.SetDeadline(time.Time{})
		c = tc
	}
	var wmu sync.Mutex
	r := bufio.NewReader(c)
	for {
		env, err := readEnvelope(r, t.cfg.MaxFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.cfg.Logger.Debug("tree transport: dropping connection", "peer", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		if env.Req == nil {
			continue
		}
		// Serve runs on this goroutine: handlers must not block for long,
		// and a goroutine per request cost more than the request itself.
		id, req, asJSON := env.ID, env.Req, env.json
		var once sync.Once
		t.handler.Serve(req, func(resp *Response) {
			once.Do(func() {
				out := &envelope{ID: id, Resp: resp, json: asJSON}
				b, err := encodeFrame(out, t.cfg.MaxFrame)
				if err != nil {
					b, _ = encodeFrame(&envelope{ID: id, Err: err.Error(), json: asJSON}, t.cfg.MaxFrame)
				}
				wmu.Lock()
				defer wmu.Unlock()
				c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Write(b); err != nil {
					c.Close()
				}
			})
		})
	}
}

// Send implements Transport. Over an open connection the request is
// written at once; a connection still to be dialled is dialled on another
// goroutine.
func (t *TCPTransport) Send(to ring.Member, req *Request, reply func(*Response, error)) {
	if cc := t.openConn(to.Addr); cc != nil {
		t.sendOn(cc, to, req, reply)
		return
	}
	go t.send(to, req, reply)
}

// openConn returns the pooled connection to addr if it is established.
func (t *TCPTransport) openConn(addr string) *clientConn {
	t.mu.Lock()
	cc := t.conns[addr]
	t.mu.Unlock()
	if cc == nil {
		return nil
	}
	select {
	case <-cc.ready:
	default:
		return nil
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.err != nil {
		return nil
	}
	return cc
}

func (t *TCPTransport) send(to ring.Member, req *Request, reply func(*Response, error)) {
	cc, err := t.conn(to.Addr, req.Deadline)
	if err != nil {
		reply(nil, fmt.Errorf("tree transport: %s at %s: %w", to.Name, to.Addr, err))
		return
	}
	t.sendOn(cc, to, req, reply)
}

// sendOn writes req to an established connection.
func (t *TCPTransport) sendOn(cc *clientConn, to ring.Member, req *Request, reply func(*Response, error)) {
	id := t.ids.Add(1)
	b, err := encodeFrame(&envelope{ID: id, Req: req, json: cc.json}, t.cfg.MaxFrame)
	if err != nil {
		reply(nil, fmt.Errorf("tree transport: to %s: %w", to.Name, err))
		return
	}
	wait := time.Until(req.Deadline)
	if wait <= 0 {
		reply(nil, ErrTimeout)
		return
	}
	p := &pending{reply: reply}
	cc.mu.Lock()
	if cc.err != nil {
		err := cc.err
		cc.mu.Unlock()
		reply(nil, fmt.Errorf("tree transport: %s at %s: %w", to.Name, to.Addr, err))
		return
	}
	cc.pending[id] = p
	p.timer = time.AfterFunc(wait, func() {
		if cc.take(id) != nil {
			p.reply(nil, ErrTimeout)
		}
	})
	cc.mu.Unlock()
	cc.wmu.Lock()
	cc.c.SetWriteDeadline(time.Now().Add(min(wait, 5*time.Second)))
	_, err = cc.c.Write(b)
	cc.wmu.Unlock()
	if err != nil {
		cc.fail(err)
	}
}

// Connect makes sure a connection to addr is open, dialling it (and, over
// TLS, doing the handshake) now if there is none, so that a later Send
// need not.
func (t *TCPTransport) Connect(addr string) error {
	if t.openConn(addr) != nil {
		return nil
	}
	_, err := t.conn(addr, time.Now().Add(t.cfg.DialTimeout))
	return err
}

// Connected reports whether a connection to addr is open.
func (t *TCPTransport) Connected(addr string) bool { return t.openConn(addr) != nil }

// conn returns the pooled connection to addr, dialling it if needed.
func (t *TCPTransport) conn(addr string, deadline time.Time) (*clientConn, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errors.New("transport closed")
	}
	cc := t.conns[addr]
	if cc == nil {
		dial, asJSON := strings.CutPrefix(addr, jsonScheme)
		cc = &clientConn{t: t, addr: addr, json: asJSON, ready: make(chan struct{}), pending: map[uint64]*pending{}}
		t.conns[addr] = cc
		t.mu.Unlock()
		timeout := min(t.cfg.DialTimeout, max(time.Until(deadline), time.Millisecond))
		c, err := t.dial(dial, timeout)
		cc.mu.Lock()
		cc.c, cc.err = c, err
		cc.mu.Unlock()
		close(cc.ready)
		if err != nil {
			t.drop(cc)
			return nil, err
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			cc.fail(errors.New("transport closed"))
			return nil, errors.New("transport closed")
		}
		t.wg.Add(1)
		t.mu.Unlock()
		go cc.read()
		return cc, nil
	}
	t.mu.Unlock()
	select {
	case <-cc.ready:
	case <-time.After(max(time.Until(deadline), 0)):
		return nil, ErrTimeout
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.err != nil {
		return nil, cc.err
	}
	return cc, nil
}

// dial connects to a peer's address, over TLS when the transport has
// ClientTLS: the handshake, bounded by timeout too, verifies the peer
// before anything is sent.
func (t *TCPTransport) dial(addr string, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if t.cfg.ClientTLS == nil {
		return d.Dial("tcp", addr)
	}
	c, err := tls.DialWithDialer(d, "tcp", addr, t.cfg.ClientTLS)
	if err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return c, nil
}

func (t *TCPTransport) drop(cc *clientConn) {
	t.mu.Lock()
	if t.conns[cc.addr] == cc {
		delete(t.conns, cc.addr)
	}
	t.mu.Unlock()
}

// clientConn is a pooled outgoing connection.
type clientConn struct {
	t     *TCPTransport
	addr  string
	json  bool // the peer reads only JSON frames
	ready chan struct{}
	wmu   sync.Mutex

	mu      sync.Mutex
	c       net.Conn
	err     error
	pending map[uint64]*pending
}

type pending struct {
	reply func(*Response, error)
	timer *time.Timer
}

func (cc *clientConn) take(id uint64) *pending {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	p := cc.pending[id]
	delete(cc.pending, id)
	return p
}

func (cc *clientConn) read() {
	defer cc.t.wg.Done()
	r := bufio.NewReader(cc.c)
	for {
		env, err := readEnvelope(r, cc.t.cfg.MaxFrame)
		if err != nil {
			cc.fail(err)
			return
		}
		p := cc.take(env.ID)
		if p == nil {
			continue
		}
		if p.timer != nil {
			p.timer.Stop()
		}
		switch {
		case env.Err != "":
			p.reply(nil, fmt.Errorf("tree transport: peer %s: %s", cc.addr, env.Err))
		case env.Resp == nil:
			p.reply(nil, fmt.Errorf("tree transport: peer %s sent an empty answer", cc.addr))
		default:
			p.reply(env.Resp, nil)
		}
	}
}

// fail closes the connection and fails its pending requests.
func (cc *clientConn) fail(err error) {
	cc.t.drop(cc)
	cc.mu.Lock()
	if cc.err == nil {
		cc.err = err
	}
	ps := cc.pending
	cc.pending = map[uint64]*pending{}
	c := cc.c
	cc.mu.Unlock()
	if c != nil {
		c.Close()
	}
	for _, p := range ps {
		if p.timer != nil {
			p.timer.Stop()
		}
		p.reply(nil, fmt.Errorf("tree transport: connection to %s: %w", cc.addr, err))
	}
}

// encodeFrame returns env as a length-prefixed frame, in the binary format
// unless env.json is set.
func encodeFrame(env *envelope, maxFrame int) ([]byte, error) {
	var b []byte
	var err error
	if env.json {
		var body []byte
		if body, err = json.Marshal(env); err == nil {
			b = append(make([]byte, 4, 4+len(body)), body...)
		}
	} else {
		b, err = appendEnvelope(make([]byte, 4, 256), env)
	}
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	if n := len(b) - 4; n > maxFrame {
		return nil, fmt.Errorf("message of %d bytes exceeds the %d-byte limit", n, maxFrame)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b, nil
}

// readEnvelope reads and decodes one frame.
func readEnvelope(r io.Reader, maxFrame int) (*envelope, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(maxFrame) {
		return nil, fmt.Errorf("frame of %d bytes exceeds the %d-byte limit", n, maxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("frame of %d bytes cut short: %w", n, err)
	}
	return decodeEnvelope(b)
}

// decodeEnvelope parses a frame body in either format, saying where it is
// malformed.
func decodeEnvelope(b []byte) (*envelope, error) {
	if len(b) > 0 && b[0] == wireBinary {
		return decodeBinary(b)
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("frame body: byte %d: %w", se.Offset, err)
		case errors.As(err, &te):
			return nil, fmt.Errorf("frame body: byte %d: field %s: %w", te.Offset, te.Field, err)
		}
		return nil, fmt.Errorf("frame body: %w", err)
	}
	if env.Req != nil && env.Resp != nil {
		return nil, errors.New("frame body: both a request and an answer")
	}
	env.json = true
	return &env, nil
}
