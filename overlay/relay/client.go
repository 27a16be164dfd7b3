package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/yamux"
	"github.com/pond-htc/pond/overlay/api"
)

// Client is the worker's side: it keeps a tunnel open to its relay,
// opening it again with backoff when it drops, and hands what arrives
// through it to its listeners (API, Tree) and its memberlist transport
// (Gossip). The worker binds no socket of its own for them.
type Client struct {
	dialer *Dialer
	logger *slog.Logger

	api, tree *Listener
	// gossip is the memberlist transport in use: NewGossip replaces it.
	gossip atomic.Pointer[GossipTransport]
	// out holds framed gossip packets waiting for the tunnel.
	out chan []byte

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	sess     *yamux.Session
	attaches int
	// addrs are the worker's addresses on the relay now; onAddrs is told
	// when they change.
	addrs   api.RelayAddrs
	onAddrs func(api.RelayAddrs)
	// onAttach is told each time the tunnel opens again.
	onAttach func(api.RelayAddrs)
}

// MaxBackoff caps the wait between two attempts to open a tunnel: well
// inside a claim's lease (10 s by default), so that a worker back within
// a second of its relay loses no job.
const MaxBackoff = 2 * time.Second

// jitter spreads d over [d/2, d), so that the workers of a restarted relay
// do not all come back at once.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// Connect opens the first tunnel through d, trying again with backoff
// until it succeeds or ctx is done, and keeps it open (asking for the
// same addresses each time) until Close.
func Connect(ctx context.Context, d *Dialer, logger *slog.Logger) (*Client, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "relay", "relay", d.Relay)
	var (
		conn  net.Conn
		addrs api.RelayAddrs
		err   error
	)
	delay := 100 * time.Millisecond
	for {
		conn, addrs, err = d.Dial(ctx, api.RelayAddrs{})
		if err == nil {
			break
		}
		var se *StatusError
		if errors.As(err, &se) && se.Status >= 400 && se.Status < 500 && se.Status != 409 {
			return nil, fmt.Errorf("opening a tunnel: %w", err)
		}
		logger.Warn("cannot open a tunnel to the relay yet; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("opening a tunnel to relay %s: %w (last error: %v)", d.Relay, ctx.Err(), err)
		case <-time.After(jitter(delay)):
		}
		delay = min(2*delay, MaxBackoff)
	}
	if err := validAddrs(addrs); err != nil {
		conn.Close()
		return nil, fmt.Errorf("relay %s: %w", d.Relay, err)
	}
	c := &Client{dialer: d, logger: logger, addrs: addrs, out: make(chan []byte, packetQueue)}
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.api = newListener(addrs.API)
	c.tree = newListener(addrs.Tree)
	c.gossip.Store(newGossipTransport(c))
	sess, err := yamux.Client(conn, tunnelConfig())
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("relay %s: %w", d.Relay, err)
	}
	c.sess = sess // usable as soon as Connect returns
	c.wg.Go(func() { c.keep(sess) })
	return c, nil
}

// Addrs are the worker's addresses on the relay now. They change when
// the relay cannot give back those the worker had (a relay restarted
// while another program took its ports).
func (c *Client) Addrs() api.RelayAddrs {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs
}

// OnAddrs has f called, in a goroutine of its own, with the worker's new
// addresses each time the tunnel opens again on other addresses than it
// had: what the worker advertises must follow them.
func (c *Client) OnAddrs(f func(api.RelayAddrs)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onAddrs = f
}

// OnAttach has f called, in a goroutine of its own, with the worker's
// addresses each time the tunnel opens again after it dropped, once it
// carries the worker's traffic: a relay that restarted may not know the
// worker any more, and the worker may have seen it leave the sea.
func (c *Client) OnAttach(f func(api.RelayAddrs)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onAttach = f
}

// API is the listener of the worker's API: connections that reached its
// API address on the relay.
func (c *Client) API() net.Listener { return c.api }

// Tree is the listener of the worker's tree queries.
func (c *Client) Tree() net.Listener { return c.tree }

// Gossip is the worker's memberlist transport.
func (c *Client) Gossip() *GossipTransport { return c.gossip.Load() }

// NewGossip makes a new memberlist transport the worker's and returns
// it: what arrives for the worker's gossip from now on goes to it. A
// memberlist shut down shuts its transport down for good, and a worker
// that moves to another gossip address (gossip.Sea.Move) starts another
// one on a new transport.
func (c *Client) NewGossip() *GossipTransport {
	t := newGossipTransport(c)
	c.gossip.Store(t)
	return t
}

// Connected reports whether the tunnel is open now.
func (c *Client) Connected() bool { return c.session() != nil }

// Attaches counts the tunnels opened so far.
func (c *Client) Attaches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attaches
}

func (c *Client) session() *yamux.Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

// Close closes the tunnel and the listeners, and stops reconnecting.
func (c *Client) Close() error {
	c.cancel()
	if s := c.session(); s != nil {
		s.Close()
	}
	c.wg.Wait()
	c.api.Close()
	c.tree.Close()
	return nil
}

// keep serves sess, then opens the tunnel again whenever it drops, until
// the client is closed.
func (c *Client) keep(sess *yamux.Session) {
	for {
		c.serve(sess)
		if c.ctx.Err() != nil {
			return
		}
		c.logger.Warn("tunnel to the relay dropped; reconnecting")
		delay := 100 * time.Millisecond
		for {
			old := c.Addrs()
			conn, addrs, err := c.dialer.Dial(c.ctx, old)
			if err == nil {
				err = validAddrs(addrs)
				if err != nil {
					conn.Close()
					err = fmt.Errorf("relay %s: %w", c.dialer.Relay, err)
				}
			}
			if err == nil {
				if sess, err = yamux.Client(conn, tunnelConfig()); err == nil {
					if addrs.Gossip == old.Gossip && addrs.API == old.API && addrs.Tree == old.Tree {
						c.logger.Info("tunnel to the relay open again", "gossip", addrs.Gossip, "api", addrs.API)
					} else {
						c.logger.Warn("tunnel to the relay open again on other addresses; advertising them", "gossip", addrs.Gossip, "api", addrs.API, "tree", addrs.Tree,
							"old_gossip", old.Gossip, "old_api", old.API, "old_tree", old.Tree)
						c.setAddrs(addrs)
					}
					break
				}
				conn.Close()
			}
			c.logger.Warn("reconnecting to the relay", "err", err, "retry_in", delay)
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(jitter(delay)):
			}
			delay = min(2*delay, MaxBackoff)
		}
	}
}

// validAddrs checks the addresses a relay gave.
func validAddrs(addrs api.RelayAddrs) error {
	for _, a := range []string{addrs.Gossip, addrs.API, addrs.Tree} {
		if _, err := netip.ParseAddrPort(a); err != nil {
			return fmt.Errorf("gave address %q: %w", a, err)
		}
	}
	return nil
}

// setAddrs makes addrs the worker's addresses and tells OnAddrs.
func (c *Client) setAddrs(addrs api.RelayAddrs) {
	c.mu.Lock()
	c.addrs = addrs
	f := c.onAddrs
	c.mu.Unlock()
	c.api.setAddr(addrs.API)
	c.tree.setAddr(addrs.Tree)
	if f != nil {
		c.wg.Go(func() { f(addrs) })
	}
}

// serve hands the streams of sess to the listeners and sends the queued
// gossip packets through it, until it ends.
func (c *Client) serve(sess *yamux.Session) {
	c.mu.Lock()
	c.sess = sess
	c.attaches++
	again, f, addrs := c.attaches > 1, c.onAttach, c.addrs
	c.mu.Unlock()
	if again && f != nil {
		c.wg.Go(func() { f(addrs) })
	}
	var wg sync.WaitGroup
	wg.Go(func() { sendPackets(sess, c.out) })
	go func() {
		select {
		case <-c.ctx.Done():
			sess.Close()
		case <-sess.CloseChan():
		}
	}()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			break
		}
		wg.Go(func() { c.dispatch(st) })
	}
	sess.Close()
	c.mu.Lock()
	c.sess = nil
	c.mu.Unlock()
	wg.Wait()
}

// dispatch reads a stream's header and hands it on.
func (c *Client) dispatch(st *yamux.Stream) {
	st.SetReadDeadline(time.Now().Add(10 * time.Second))
	kind, src, err := ReadHeader(st)
	st.SetReadDeadline(time.Time{})
	if err != nil {
		c.logger.Warn("bad stream from the relay", "err", err)
		st.Close()
		return
	}
	conn := &streamConn{Stream: st, remote: net.TCPAddrFromAddrPort(src)}
	switch kind {
	case KindAPI:
		c.api.push(conn)
	case KindTree:
		c.tree.push(conn)
	case KindGossip:
		g := c.Gossip()
		select {
		case g.streams <- conn:
		case <-g.done:
			conn.Close()
		case <-c.ctx.Done():
			conn.Close()
		}
	case KindPackets:
		c.readPackets(st)
	default:
		c.logger.Warn("the relay opened a stream of a kind only a worker opens", "kind", string(kind))
		st.Close()
	}
}

// readPackets hands the gossip packets of a stream to memberlist.
func (c *Client) readPackets(st *yamux.Stream) {
	defer st.Close()
	r := bufio.NewReader(st)
	for {
		from, payload, err := ReadPacket(r)
		if err != nil {
			return
		}
		p := &memberlist.Packet{Buf: payload, From: net.UDPAddrFromAddrPort(from), Timestamp: time.Now()}
		g := c.Gossip()
		select {
		case g.packets <- p:
		case <-g.done:
			// A transport shut down by a move: the next packet goes to
			// the new one.
			continue
		case <-c.ctx.Done():
			return
		}
	}
}

// streamConn is a stream that reports the address of the connection it
// carries as its remote address.
type streamConn struct {
	*yamux.Stream
	remote net.Addr
}

func (c *streamConn) RemoteAddr() net.Addr { return c.remote }

// Read and Write report a deadline reached as the standard library's
// os.ErrDeadlineExceeded does: a timeout that is temporary. yamux's own
// says it is not, and crypto/tls then takes the connection for broken
// forever, so an HTTP server over TLS (which cuts its background read
// short with a deadline after every response) would close every
// kept-alive connection after its first request.
func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.Stream.Read(p)
	return n, deadline(err)
}

func (c *streamConn) Write(p []byte) (int, error) {
	n, err := c.Stream.Write(p)
	return n, deadline(err)
}

func deadline(err error) error {
	if errors.Is(err, yamux.ErrTimeout) {
		return os.ErrDeadlineExceeded
	}
	return err
}

// Listener is a net.Listener of the connections that reached one of the
// worker's addresses on the relay.
type Listener struct {
	addr atomic.Pointer[net.TCPAddr]
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

// backlog bounds the connections waiting for Accept.
const backlog = 128

func newListener(addr string) *Listener {
	l := &Listener{ch: make(chan net.Conn, backlog), done: make(chan struct{})}
	l.setAddr(addr)
	return l
}

func (l *Listener) setAddr(addr string) {
	ap, _ := netip.ParseAddrPort(addr)
	l.addr.Store(net.TCPAddrFromAddrPort(ap))
}

func (l *Listener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	default:
		c.Close() // backlog full, as a kernel refuses
	}
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; the tunnel stays open.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the address on the relay now.
func (l *Listener) Addr() net.Addr { return l.addr.Load() }

// GossipTransport is memberlist's transport of a worker behind a relay:
// packets and stream connections to and from its gossip address on the
// relay, carried by the tunnel.
type GossipTransport struct {
	c       *Client
	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{}
	once    sync.Once
}

var _ memberlist.Transport = (*GossipTransport)(nil)

func newGossipTransport(c *Client) *GossipTransport {
	return &GossipTransport{c: c, packets: make(chan *memberlist.Packet, packetQueue), streams: make(chan net.Conn), done: make(chan struct{})}
}

// FinalAdvertiseAddr is the worker's gossip address on the relay, whatever
// was configured.
func (t *GossipTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	g := t.c.Addrs().Gossip
	ap, err := netip.ParseAddrPort(g)
	if err != nil {
		return nil, 0, fmt.Errorf("relay gossip address %q: %w", g, err)
	}
	return ap.Addr().AsSlice(), int(ap.Port()), nil
}

// WriteTo queues a packet for the relay to send from the worker's gossip
// address; a packet that finds the queue full is dropped, as UDP drops.
func (t *GossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	to, err := resolve(addr)
	if err != nil {
		return time.Time{}, err
	}
	frame, err := AppendPacket(nil, to, b)
	if err != nil {
		return time.Time{}, err
	}
	select {
	case t.c.out <- frame:
	default:
	}
	return time.Now(), nil
}

// resolve turns memberlist's HOST:PORT into an IP:PORT.
func resolve(addr string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap, nil
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ap := ua.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

// PacketCh gives the packets that reached the worker's gossip address.
func (t *GossipTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

// DialTimeout opens a gossip stream connection to addr from the relay.
func (t *GossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	to, err := resolve(addr)
	if err != nil {
		return nil, err
	}
	sess := t.c.session()
	if sess == nil {
		return nil, fmt.Errorf("dialing %s: the tunnel to the relay is down", addr)
	}
	st, err := sess.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("dialing %s through the relay: %w", addr, err)
	}
	if timeout > 0 {
		st.SetDeadline(time.Now().Add(timeout))
	}
	var status [1]byte
	err = WriteHeader(st, KindDial, to)
	if err == nil {
		_, err = io.ReadFull(st, status[:])
	}
	if err != nil || status[0] != DialOK {
		st.Close()
		if err == nil {
			err = errors.New("the relay refused or could not connect")
		}
		return nil, fmt.Errorf("dialing %s through the relay: %w", addr, err)
	}
	st.SetDeadline(time.Time{})
	return &streamConn{Stream: st, remote: net.TCPAddrFromAddrPort(to)}, nil
}

// StreamCh gives the gossip stream connections that reached the worker.
func (t *GossipTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown is memberlist's; the tunnel stays up until the Client closes.
func (t *GossipTransport) Shutdown() error {
	t.once.Do(func() { close(t.done) })
	return nil
}
