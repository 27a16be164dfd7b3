package cedar

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// IsCEDAR reports whether a connection's first byte starts a CEDAR packet
// header (an end flag, 0 or 1). TLS starts with 0x16 and HTTP with a
// letter, so one port serves all three.
func IsCEDAR(first byte) bool { return first == 0 || first == 1 }

// SplitOptions configure Split.
type SplitOptions struct {
	// PeekTimeout bounds the wait for a connection's first byte (default
	// 10s); a connection that sends nothing in time is closed.
	PeekTimeout time.Duration
	// MaxConns bounds the CEDAR connections served at once (default
	// 256); one over it is closed at once.
	MaxConns int
	Logger   *slog.Logger
}

// Split shares ln between CEDAR and another protocol: it peeks at each
// connection's first byte and hands a CEDAR connection to srv, every other
// one to the returned listener's Accept with the peeked byte still to be
// read. Closing the returned listener closes ln.
func Split(ctx context.Context, ln net.Listener, srv *Server, opts SplitOptions) net.Listener {
	if opts.PeekTimeout <= 0 {
		opts.PeekTimeout = 10 * time.Second
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 256
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	sl := &splitListener{Listener: ln, srv: srv, opts: opts, ctx: ctx,
		conns: make(chan net.Conn), done: make(chan struct{}), slots: make(chan struct{}, opts.MaxConns)}
	go sl.loop()
	return sl
}

type splitListener struct {
	net.Listener
	srv   *Server
	opts  SplitOptions
	ctx   context.Context
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error
	slots chan struct{}
}

func (sl *splitListener) loop() {
	for {
		conn, err := sl.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// The error is set once, with done closed, so that Close
			// racing the failed Accept cannot write it too.
			sl.once.Do(func() {
				sl.err = err
				close(sl.done)
			})
			return
		}
		go sl.route(conn)
	}
}

func (sl *splitListener) route(conn net.Conn) {
	_ = conn.SetReadDeadline(time.Now().Add(sl.opts.PeekTimeout))
	br := bufio.NewReader(conn)
	first, err := br.Peek(1)
	_ = conn.SetReadDeadline(time.Time{})
	if err != nil {
		conn.Close()
		return
	}
	if !IsCEDAR(first[0]) {
		select {
		case sl.conns <- &peekedConn{Conn: conn, r: br}:
		case <-sl.done:
			conn.Close()
		}
		return
	}
	select {
	case sl.slots <- struct{}{}:
	default:
		sl.opts.Logger.Warn("cedar connection refused: too many at once", "peer", conn.RemoteAddr().String(), "limit", sl.opts.MaxConns)
		conn.Close()
		return
	}
	defer func() { <-sl.slots }()
	sl.srv.ServeConn(sl.ctx, conn, br)
}

// Accept returns the next connection that is not CEDAR.
func (sl *splitListener) Accept() (net.Conn, error) {
	select {
	case c := <-sl.conns:
		return c, nil
	case <-sl.done:
		return nil, sl.err
	}
}

// Close closes the listener under it.
func (sl *splitListener) Close() error {
	err := sl.Listener.Close()
	sl.once.Do(func() {
		sl.err = net.ErrClosed
		close(sl.done)
	})
	return err
}

// peekedConn reads through the buffer that holds the peeked byte.
type peekedConn struct {
	net.Conn
	r io.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
