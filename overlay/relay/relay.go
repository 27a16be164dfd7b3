// Package relay lets a worker that accepts no inbound connection (behind
// NAT or a site firewall) be reached as if it did. The worker keeps one
// authenticated connection to a relay agent (its pool's central manager by
// default) and runs yamux over it: a tunnel. The relay listens on its own
// host on the worker's behalf, for gossip (UDP and TCP on one port), the
// API and tree queries, and forwards what arrives there through the
// tunnel; the worker advertises those addresses as its own, so every other
// node dials them as usual, end-to-end TLS and tokens unchanged. The
// worker's own gossip leaves through the tunnel too, from its gossip
// address on the relay, so that answers come back there.
//
// Relay is the relay's side and Client the worker's; Client's listeners
// and its memberlist transport (GossipTransport) take the place of the
// sockets a directly reachable agent binds.
package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/pond-htc/pond/overlay/api"
)

// Config configures a Relay.
type Config struct {
	// Name is the relay's node name, given to its workers.
	Name string
	// Host is the IP address the relay listens on for its workers: that of
	// its own API, so that whoever reaches the relay reaches them.
	Host string
	// MaxWorkers bounds how many workers the relay serves at once
	// (DefaultMaxWorkers when 0).
	MaxWorkers int
	// Grace is how long the relay keeps a disconnected worker's addresses
	// for it to come back (DefaultGrace when 0).
	Grace time.Duration
	// AllowSend says whether a worker may send gossip to addr, by packet
	// or stream: the relay's sea's members. Nil allows nothing.
	AllowSend func(addr netip.AddrPort) bool
	// Recheck, if set, checks again the token a tunnel was opened with
	// (revocation, say) every RecheckEvery (DefaultRecheckEvery when 0): a
	// tunnel whose token no longer passes is closed, and its worker opens
	// another with the token it holds now. A tunnel is closed at its
	// token's expiry in any case.
	Recheck      func(token string) error
	RecheckEvery time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// DefaultRecheckEvery is how often a tunnel's token is checked again.
const DefaultRecheckEvery = 30 * time.Second

// Defaults of Config.
const (
	DefaultMaxWorkers = 256
	DefaultGrace      = 2 * time.Minute
)

// packetQueue bounds the gossip packets waiting to cross a tunnel in
// one direction; more are dropped, as a full socket buffer drops them.
const packetQueue = 512

// maxDials bounds the gossip stream connections one worker has the relay
// hold open at once; more are refused.
const maxDials = 64

// reconnectWait is how long a connection to a disconnected worker waits
// for its tunnel to come back.
const reconnectWait = 5 * time.Second

// dialTimeout bounds the relay's connection to a gossip peer for a worker.
const dialTimeout = 5 * time.Second

// ErrFull is returned by Attach when the relay serves MaxWorkers workers.
var ErrFull = errors.New("relay: serving as many workers as it may")

// ErrPortsTaken is returned by Attach when the relay can bind no port for
// a worker.
var ErrPortsTaken = errors.New("relay: the addresses the worker asks for are taken")

// Relay serves workers over their tunnels. The zero value is not usable;
// call New.
type Relay struct {
	cfg    Config
	logger *slog.Logger

	mu      sync.Mutex
	closed  bool
	workers map[string]*worker
	// bytes counts what the tunnels carried (metrics.go).
	bytes byteCounts
}

// New returns a relay that serves no worker yet.
func New(cfg Config) *Relay {
	if cfg.MaxWorkers <= 0 {
		cfg.MaxWorkers = DefaultMaxWorkers
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.RecheckEvery <= 0 {
		cfg.RecheckEvery = DefaultRecheckEvery
	}
	if cfg.AllowSend == nil {
		cfg.AllowSend = func(netip.AddrPort) bool { return false }
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Relay{cfg: cfg, logger: logger.With("component", "relay"), workers: map[string]*worker{}}
}

// Workers lists the workers the relay holds addresses for, by name.
func (r *Relay) Workers() []api.RelayWorker {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]api.RelayWorker, 0, len(r.workers))
	for _, w := range r.workers {
		w.mu.Lock()
		out = append(out, api.RelayWorker{Name: w.name, Addrs: w.addrs, Connected: w.sess != nil})
		w.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Drop closes the tunnel of the named worker, as a network fault would,
// keeping its addresses for the grace period. It reports whether the
// worker had a tunnel.
func (r *Relay) Drop(name string) bool {
	r.mu.Lock()
	w := r.workers[name]
	r.mu.Unlock()
	if w == nil {
		return false
	}
	w.mu.Lock()
	s := w.sess
	w.mu.Unlock()
	if s == nil {
		return false
	}
	s.Close()
	return true
}

// Close closes every tunnel and every worker's listeners.
func (r *Relay) Close() {
	r.mu.Lock()
	r.closed = true
	ws := r.workers
	r.workers = map[string]*worker{}
	r.mu.Unlock()
	for _, w := range ws {
		w.close()
	}
}

// Attach serves the named worker over a tunnel: it binds the worker's
// addresses (those the relay still holds for it, else, port by port, the
// ones it asks for in want when it had them before and they are free,
// else new ones), calls accept with them to finish the upgrade and get the
// connection, and forwards over it until the connection ends or ctx is
// done. The worker's addresses are kept for the grace period afterwards.
func (r *Relay) Attach(ctx context.Context, name string, want api.RelayAddrs, accept func(api.RelayAddrs) (net.Conn, error)) error {
	w, err := r.reserve(name, want)
	if err != nil {
		return err
	}
	conn, err := accept(w.addrs)
	if err != nil {
		r.detached(w, nil)
		return err
	}
	cfg := tunnelConfig()
	sess, err := yamux.Server(conn, cfg)
	if err != nil {
		conn.Close()
		r.detached(w, nil)
		return fmt.Errorf("relay: %w", err)
	}
	old := w.setSession(sess)
	if old != nil {
		old.Close()
	}
	r.logger.Info("worker attached", "worker", name, "gossip", w.addrs.Gossip, "api", w.addrs.API, "tree", w.addrs.Tree)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := sendPackets(sess, w.in); err != nil {
			w.logger.Debug("relay: packet stream", "err", err)
		}
	})
	wg.Go(func() { w.acceptStreams(sess, r.cfg.AllowSend) })
	select {
	case <-sess.CloseChan():
	case <-ctx.Done():
		sess.Close()
	}
	wg.Wait()
	r.detached(w, sess)
	r.logger.Info("worker detached; its addresses are kept", "worker", name, "grace", r.cfg.Grace)
	return nil
}

// tunnelConfig is yamux's configuration on both ends of a tunnel: a dead
// tunnel is noticed within seconds, and each stream buffers at most
// yamux's default window.
func tunnelConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.KeepAliveInterval = 2 * time.Second
	cfg.ConnectionWriteTimeout = 5 * time.Second
	cfg.StreamOpenTimeout = 10 * time.Second
	cfg.StreamCloseTimeout = 30 * time.Second
	cfg.LogOutput = io.Discard
	return cfg
}

// reserve finds or makes the worker's entry and its listeners.
func (r *Relay) reserve(name string, want api.RelayAddrs) (*worker, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("relay: closed")
	}
	if w := r.workers[name]; w != nil {
		// The addresses the relay holds for the worker win over those it
		// asks for: it follows them.
		if w.grace != nil {
			w.grace.Stop()
			w.grace = nil
		}
		w.attaching++
		return w, nil
	}
	if len(r.workers) >= r.cfg.MaxWorkers {
		return nil, fmt.Errorf("%w (%d)", ErrFull, r.cfg.MaxWorkers)
	}
	w, err := r.bind(name, want)
	if err != nil {
		return nil, err
	}
	w.attaching++
	r.workers[name] = w
	return w, nil
}

// detached records that one attachment of w ended (sess is the session
// it served, nil if it never had one) and starts the grace period when no
// other attachment holds the worker.
func (r *Relay) detached(w *worker, sess *yamux.Session) {
	w.mu.Lock()
	if sess != nil && w.sess == sess {
		w.sess = nil
		w.attached = make(chan struct{})
	}
	w.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	w.attaching--
	if w.attaching > 0 || r.workers[w.name] != w {
		return
	}
	w.grace = time.AfterFunc(r.cfg.Grace, func() {
		r.mu.Lock()
		if r.workers[w.name] != w || w.attaching > 0 {
			r.mu.Unlock()
			return
		}
		delete(r.workers, w.name)
		r.mu.Unlock()
		r.logger.Info("worker gone past its grace period; its addresses are released", "worker", w.name)
		w.close()
	})
}

// bind opens the worker's listeners on the relay's host: for each, the
// port of want when it names one the relay can bind again (a worker
// coming back to a restarted relay), else a free one. A worker that gets
// other ports than it asked for follows them (Client.OnAddrs).
func (r *Relay) bind(name string, want api.RelayAddrs) (*worker, error) {
	port := func(addr string) int {
		if addr == "" {
			return 0
		}
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return 0
		}
		return int(ap.Port())
	}
	w := &worker{name: name, logger: r.logger.With("worker", name), in: make(chan []byte, packetQueue), attached: make(chan struct{}),
		done: make(chan struct{}), dials: make(chan struct{}, maxDials), bytes: &r.bytes}
	// again reports whether a listener on a wanted port failed and a free
	// port is to be tried instead.
	again := func(what string, p int, err error) bool {
		if p == 0 {
			return false
		}
		r.logger.Warn("relay: cannot bind the port the worker had again; giving it another", "worker", name, "listener", what, "port", p, "err", err)
		return true
	}
	var err error
	p := port(want.Gossip)
	if w.gossip, w.udp, err = listenGossip(r.cfg.Host, p); err != nil && again("gossip", p, err) {
		w.gossip, w.udp, err = listenGossip(r.cfg.Host, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: gossip: %v", ErrPortsTaken, err)
	}
	listen := func(what string, p int) (net.Listener, error) {
		ln, err := net.Listen("tcp", net.JoinHostPort(r.cfg.Host, strconv.Itoa(p)))
		if err != nil && again(what, p, err) {
			ln, err = net.Listen("tcp", net.JoinHostPort(r.cfg.Host, "0"))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrPortsTaken, what, err)
		}
		return ln, nil
	}
	if w.api, err = listen("API", port(want.API)); err != nil {
		w.close()
		return nil, err
	}
	if w.tree, err = listen("tree", port(want.Tree)); err != nil {
		w.close()
		return nil, err
	}
	w.addrs = api.RelayAddrs{Gossip: w.gossip.Addr().String(), API: w.api.Addr().String(), Tree: w.tree.Addr().String(), Relay: r.cfg.Name}
	w.wg.Go(func() { w.acceptConns(w.api, KindAPI) })
	w.wg.Go(func() { w.acceptConns(w.tree, KindTree) })
	w.wg.Go(func() { w.acceptConns(w.gossip, KindGossip) })
	w.wg.Go(w.readPackets)
	return w, nil
}

// listenGossip binds TCP and UDP on one port of host: port, or a free
// one (tried a few times, as another program may hold the UDP port of a
// free TCP one).
func listenGossip(host string, port int) (net.Listener, *net.UDPConn, error) {
	var last error
	for range 10 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return nil, nil, err
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ua, err := net.ResolveUDPAddr("udp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			ln.Close()
			return nil, nil, err
		}
		udp, err := net.ListenUDP("udp", ua)
		if err == nil {
			return ln, udp, nil
		}
		ln.Close()
		last = err
		if port != 0 {
			break
		}
	}
	return nil, nil, last
}

// worker is the relay's side of one worker: its listeners, and its tunnel
// while connected.
type worker struct {
	name   string
	logger *slog.Logger
	addrs  api.RelayAddrs

	api, tree, gossip net.Listener
	udp               *net.UDPConn
	// in holds framed packets that reached the worker's gossip address,
	// waiting for the tunnel.
	in chan []byte
	// dials holds a token per gossip stream connection open for the
	// worker.
	dials chan struct{}
	// bytes counts what the worker's tunnel carries: the relay's.
	bytes *byteCounts
	wg    sync.WaitGroup

	// attaching and grace are guarded by the relay's mu.
	attaching int
	grace     *time.Timer

	mu   sync.Mutex
	sess *yamux.Session
	// attached is closed while the worker has a tunnel.
	attached chan struct{}
	// done is closed when the worker's listeners close.
	done      chan struct{}
	closeOnce sync.Once
}

// session is the worker's tunnel, nil while it is disconnected.
func (w *worker) session() *yamux.Session {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sess
}

// setSession makes sess the worker's tunnel and returns the one it
// replaces.
func (w *worker) setSession(sess *yamux.Session) *yamux.Session {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.sess
	w.sess = sess
	if old == nil {
		close(w.attached)
	}
	return old
}

// waitSession returns the worker's tunnel, waiting up to wait for one
// while it is disconnected (it is reconnecting, or the relay is still
// setting up the tunnel it has just answered); nil if none came. A tunnel
// that has ended and is not let go yet counts as none: the worker may be
// opening the next one (a tunnel can end before the relay has set it up,
// when the worker closed it at once or its connection broke).
func (w *worker) waitSession(wait time.Duration) *yamux.Session {
	deadline := time.Now().Add(wait)
	for {
		w.mu.Lock()
		sess, attached := w.sess, w.attached
		w.mu.Unlock()
		if sess != nil && !sess.IsClosed() {
			return sess
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		if sess != nil {
			// attached stays closed until the ended tunnel is let go
			// (detached): look again shortly.
			attached = nil
			left = min(left, endedPoll)
		}
		t := time.NewTimer(left)
		select {
		case <-attached:
		case <-t.C:
		case <-w.done:
			t.Stop()
			return nil
		}
		t.Stop()
	}
}

// endedPoll is how often waitSession looks again while the worker's
// tunnel has ended but is not let go yet.
const endedPoll = 10 * time.Millisecond

// close closes the worker's listeners and tunnel and waits for their
// goroutines.
func (w *worker) close() {
	w.closeOnce.Do(func() { close(w.done) })
	for _, ln := range []net.Listener{w.api, w.tree, w.gossip} {
		if ln != nil {
			ln.Close()
		}
	}
	if w.udp != nil {
		w.udp.Close()
	}
	if s := w.session(); s != nil {
		s.Close()
	}
	w.wg.Wait()
}

// acceptConns forwards each connection ln accepts through the tunnel as a
// stream of kind. A connection that arrives while the worker is
// disconnected waits up to reconnectWait for it to come back, then is
// closed.
func (w *worker) acceptConns(ln net.Listener, kind byte) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go w.forward(c, kind)
	}
}

func (w *worker) forward(c net.Conn, kind byte) {
	defer c.Close()
	st := w.openStream(reconnectWait)
	if st == nil {
		return
	}
	defer st.Close()
	src, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	if err := WriteHeader(st, kind, src); err != nil {
		return
	}
	w.bytes.splice(c, st)
}

// openStream opens a stream to the worker, waiting up to wait for a
// tunnel that takes one: a tunnel that ends as the stream is opened is
// the worker reconnecting, and the next one is waited for. Nil if none
// came in time.
func (w *worker) openStream(wait time.Duration) *yamux.Stream {
	deadline := time.Now().Add(wait)
	for {
		sess := w.waitSession(time.Until(deadline))
		if sess == nil {
			return nil
		}
		st, err := sess.OpenStream()
		if err == nil {
			return st
		}
		if !sess.IsClosed() {
			w.logger.Debug("relay: cannot open a stream to the worker", "err", err)
			return nil
		}
		w.logger.Debug("relay: the worker's tunnel ended as a connection came for it; waiting for the next", "err", err)
	}
}

// splice copies between a and b both ways until either side ends, then
// closes both.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		// Half-close where the connection allows it, so the other way
		// can finish.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
}

// readPackets reads the gossip packets that reach the worker's address
// and queues them for the tunnel, dropping them when the queue is full.
func (w *worker) readPackets() {
	buf := make([]byte, MaxPacket)
	for {
		n, from, err := w.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		frame, err := AppendPacket(nil, netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), buf[:n])
		if err != nil {
			continue
		}
		select {
		case w.in <- frame:
		default:
		}
	}
}

// sendPackets writes the packet frames queued on out on a stream of sess
// until the session ends. A failed write closes the session and is
// returned; a stream that cannot be opened returns nil, as the session
// is ending then.
func sendPackets(sess *yamux.Session, out <-chan []byte) error {
	st, err := sess.OpenStream()
	if err != nil {
		return nil
	}
	defer st.Close()
	if _, err := st.Write([]byte{KindPackets}); err != nil {
		return nil
	}
	for {
		select {
		case <-sess.CloseChan():
			return nil
		case frame := <-out:
			if _, err := st.Write(frame); err != nil {
				sess.Close()
				return err
			}
		}
	}
}

// acceptStreams serves the streams the worker opens: its gossip packets
// to send, and its gossip stream connections to open, both only to
// addresses allow accepts.
func (w *worker) acceptStreams(sess *yamux.Session, allow func(netip.AddrPort) bool) {
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		go func() {
			kind, addr, err := ReadHeader(st)
			if err != nil {
				w.logger.Warn("relay: bad stream from worker", "err", err)
				st.Close()
				return
			}
			switch kind {
			case KindPackets:
				w.writePackets(st, allow)
			case KindDial:
				w.dial(st, addr, allow)
			default:
				w.logger.Warn("relay: worker opened a stream of a kind only a relay opens", "kind", string(kind))
				st.Close()
			}
		}()
	}
}

// writePackets sends the worker's gossip packets from its address.
func (w *worker) writePackets(st net.Conn, allow func(netip.AddrPort) bool) {
	defer st.Close()
	r := bufio.NewReader(st)
	for {
		to, payload, err := ReadPacket(r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				w.logger.Debug("relay: packet stream from worker", "err", err)
			}
			return
		}
		if !allow(to) {
			w.logger.Debug("relay: refused a packet to an address outside the sea", "to", to.String())
			continue
		}
		w.udp.WriteToUDPAddrPort(payload, to)
	}
}

// dial opens a gossip stream connection to addr for the worker.
func (w *worker) dial(st net.Conn, addr netip.AddrPort, allow func(netip.AddrPort) bool) {
	defer st.Close()
	if !allow(addr) {
		w.logger.Warn("relay: refused a worker's connection to an address outside the sea", "to", addr.String())
		st.Write([]byte{DialRefused})
		return
	}
	select {
	case w.dials <- struct{}{}:
		defer func() { <-w.dials }()
	default:
		w.logger.Warn("relay: refused a worker's connection: too many open", "to", addr.String(), "max", maxDials)
		st.Write([]byte{DialRefused})
		return
	}
	c, err := net.DialTimeout("tcp", addr.String(), dialTimeout)
	if err != nil {
		st.Write([]byte{DialRefused})
		return
	}
	if _, err := st.Write([]byte{DialOK}); err != nil {
		c.Close()
		return
	}
	w.bytes.splice(c, st)
}
