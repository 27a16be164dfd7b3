package cedar

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// SSL authenticates a client by a certificate: the server side of
// HTCondor's SSL method, a TLS handshake whose records travel inside
// CEDAR messages, each side stepping its TLS engine in turn. The server
// presents its certificate and requires one of the client that Config's
// ClientCAs verify; a client without one, or with one of another CA, is
// refused.
type SSL struct {
	// Config returns the TLS configuration: the server's certificate and
	// the CAs client certificates must come from (ClientCAs). It is
	// called for each authentication, so that renewed files are used.
	Config func() (*tls.Config, error)
	// Grant maps a verified client certificate to what pond grants it;
	// nil claims grant nothing.
	Grant func(cert *x509.Certificate) *auth.Claims
}

// Name implements Method.
func (*SSL) Name() string { return "SSL" }

// Bit implements Method.
func (*SSL) Bit() int { return BitSSL }

// The statuses of HTCondor's SSL exchange, each message's first value.
const (
	sslError     = -1
	sslOK        = 0
	sslReceiving = 2
	sslQuitting  = 3
	sslHolding   = 4
)

// Limits of the exchange: the TLS bytes of one message (HTCondor's
// AUTH_SSL_BUF_SIZE), the rounds of a phase, and the session key the
// server sends through TLS.
const (
	sslMaxMessage = 1 << 20
	sslMaxRounds  = 256
	sslKeyLen     = 256
)

// Authenticate implements Method.
func (m *SSL) Authenticate(ctx context.Context, s *Stream) (*Identity, error) {
	var cfg *tls.Config
	var cfgErr error
	if m.Config != nil {
		cfg, cfgErr = m.Config()
	} else {
		cfgErr = errors.New("no TLS configuration")
	}
	status := int64(sslOK)
	if cfgErr != nil {
		status = sslError
	}
	// Phase 1: each side says whether it is set up, the server first.
	if err := putAll(s, status); err != nil {
		return nil, err
	}
	client, err := s.GetInt()
	if err != nil {
		return nil, fmt.Errorf("reading the client's status: %w", err)
	}
	if err := s.EndRead(); err != nil {
		return nil, err
	}
	if status != sslOK {
		return nil, fmt.Errorf("the server's TLS configuration: %w", cfgErr)
	}
	if client != sslOK {
		return nil, fmt.Errorf("the client could not set up TLS (status %d)", client)
	}
	cfg = cfg.Clone()
	switch {
	case cfg.ClientCAs != nil:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case cfg.VerifyConnection != nil:
		// The configuration verifies the client's certificate itself
		// (auth.ServerTLS): it must present one.
		cfg.ClientAuth = tls.RequireAnyClientCert
	default:
		_ = m.quit(s, nil)
		return nil, errors.New("the server's TLS configuration verifies no client certificate")
	}
	cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
	cfg.SessionTicketsDisabled = true
	eng := newTLSEngine(ctx, cfg)
	defer eng.close()

	// Phase 2: the handshake, the client first: on even rounds the server
	// reads, on odd ones it sends, stepping its engine before each.
	if err := m.rounds(s, eng, false, func() (int64, error) {
		done, err := eng.step()
		switch {
		case err != nil:
			return sslQuitting, err
		case done:
			return sslHolding, nil
		}
		return sslReceiving, nil
	}); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	peers := eng.conn.ConnectionState().PeerCertificates
	if len(peers) == 0 {
		_ = m.quit(s, eng)
		return nil, errors.New("the client presented no certificate")
	}
	// Phase 3: the session key through TLS, the server first. The
	// channel's key comes from ECDH; the exchange runs all the same.
	key := make([]byte, sslKeyLen)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	written := false
	if err := m.rounds(s, eng, true, func() (int64, error) {
		if !written {
			if _, err := eng.conn.Write(key); err != nil {
				return sslQuitting, err
			}
			written = true
		}
		return sslHolding, nil
	}); err != nil {
		return nil, fmt.Errorf("sending the session key: %w", err)
	}
	cert := peers[0]
	id := &Identity{Method: "SSL", User: cert.Subject.CommonName}
	if m.Grant != nil {
		id.Claims = m.Grant(cert)
	}
	return id, nil
}

// rounds runs one phase: step gives the server's status before each
// round; the server sends on even rounds when sendFirst, else on odd
// ones, and reads on the others, until both sides hold. A side that
// quits ends it with an error, the server telling the client when it is
// the one that quits.
func (m *SSL) rounds(s *Stream, eng *tlsEngine, sendFirst bool, step func() (int64, error)) error {
	status, client := int64(sslReceiving), int64(sslReceiving)
	var fail error
	for r := 0; ; r++ {
		if r > sslMaxRounds {
			_ = m.quit(s, eng)
			return errors.New("too many rounds")
		}
		if status != sslHolding {
			status, fail = step()
		}
		if (r%2 == 0) == sendFirst {
			if err := putMessage(s, status, eng.drain()); err != nil {
				return err
			}
			if status == sslQuitting {
				return fail
			}
		} else {
			cs, data, err := getMessage(s)
			if err != nil {
				return err
			}
			client = cs
			if client == sslQuitting || client == sslError {
				if fail != nil {
					return fail
				}
				return fmt.Errorf("the client quit (status %d)", client)
			}
			if status == sslQuitting {
				_ = putMessage(s, sslQuitting, eng.drain())
				return fail
			}
			if err := eng.feed(data); err != nil {
				_ = m.quit(s, eng)
				return err
			}
		}
		if status == sslHolding && client == sslHolding {
			return nil
		}
	}
}

// quit tells the client the server gives up, with what the engine (when
// there is one) wrote, a TLS alert.
func (m *SSL) quit(s *Stream, eng *tlsEngine) error {
	var data []byte
	if eng != nil {
		data = eng.drain()
	}
	return putMessage(s, sslQuitting, data)
}

func putAll(s *Stream, vals ...int64) error {
	for _, v := range vals {
		if err := s.PutInt(v); err != nil {
			return err
		}
	}
	return s.EndMessage()
}

// putMessage sends one message of the exchange: the status, the length
// of the TLS bytes and the bytes.
func putMessage(s *Stream, status int64, data []byte) error {
	if err := s.PutInt(status); err != nil {
		return err
	}
	if err := s.PutInt(int64(len(data))); err != nil {
		return err
	}
	if len(data) > 0 {
		if err := s.PutBytes(data); err != nil {
			return err
		}
	}
	return s.EndMessage()
}

// getMessage reads one message of the exchange, its TLS bytes at most
// sslMaxMessage.
func getMessage(s *Stream) (int64, []byte, error) {
	status, err := s.GetInt()
	if err != nil {
		return 0, nil, fmt.Errorf("reading the client's status: %w", err)
	}
	data, err := readBytes(s, "TLS data", sslMaxMessage)
	if err != nil {
		return 0, nil, err
	}
	if err := s.EndRead(); err != nil {
		return 0, nil, err
	}
	return status, data, nil
}

// tlsEngine runs a TLS server over memory buffers, as HTCondor's SSL
// method drives OpenSSL over memory BIOs: feed gives it the client's
// bytes, step lets it work until it needs more, drain takes what it
// wrote. The handshake runs in a goroutine whose reads block on an
// empty buffer.
type tlsEngine struct {
	conn *tls.Conn
	mem  *memConn
}

func newTLSEngine(ctx context.Context, cfg *tls.Config) *tlsEngine {
	mem := &memConn{}
	mem.cond = sync.NewCond(&mem.mu)
	e := &tlsEngine{conn: tls.Server(mem, cfg), mem: mem}
	go func() {
		err := e.conn.HandshakeContext(ctx)
		mem.mu.Lock()
		mem.finished, mem.hsErr = true, err
		mem.cond.Broadcast()
		mem.mu.Unlock()
	}()
	return e
}

// step waits until the handshake is over (true, and its error) or needs
// bytes the client has not sent yet (false).
func (e *tlsEngine) step() (bool, error) {
	m := e.mem
	m.mu.Lock()
	defer m.mu.Unlock()
	for !m.finished && !(m.waiting && m.in.Len() == 0 && !m.closed) {
		m.cond.Wait()
	}
	return m.finished, m.hsErr
}

// feed hands the engine the client's bytes.
func (e *tlsEngine) feed(b []byte) error {
	m := e.mem
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.in.Len()+len(b) > sslMaxMessage {
		return errors.New("too much TLS data buffered")
	}
	m.in.Write(b)
	m.cond.Broadcast()
	return nil
}

// drain takes what the engine wrote, at most one message's worth.
func (e *tlsEngine) drain() []byte {
	m := e.mem
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.out.Next(sslMaxMessage))
}

// close ends the handshake goroutine, if it still runs.
func (e *tlsEngine) close() {
	m := e.mem
	m.mu.Lock()
	m.closed = true
	m.cond.Broadcast()
	m.mu.Unlock()
}

// memConn is the net.Conn under a tlsEngine's TLS server.
type memConn struct {
	mu       sync.Mutex
	cond     *sync.Cond
	in, out  bytes.Buffer
	waiting  bool // a read waits for bytes
	closed   bool
	finished bool // the handshake returned
	hsErr    error
}

func (c *memConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.in.Len() == 0 && !c.closed {
		c.waiting = true
		c.cond.Broadcast()
		c.cond.Wait()
	}
	c.waiting = false
	if c.in.Len() == 0 {
		return 0, io.EOF
	}
	return c.in.Read(p)
}

func (c *memConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	if c.out.Len()+len(p) > 4*sslMaxMessage {
		return 0, errors.New("too much TLS data to send")
	}
	return c.out.Write(p)
}

func (c *memConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.cond.Broadcast()
	return nil
}

func (c *memConn) LocalAddr() net.Addr              { return memAddr{} }
func (c *memConn) RemoteAddr() net.Addr             { return memAddr{} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "memory" }
