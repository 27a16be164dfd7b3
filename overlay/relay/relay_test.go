package relay

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

// testRelay serves a relay's attach route behind real token checks, as
// the agent does, and returns the relay, its address and a function that
// mints tokens it accepts.
func testRelay(t testing.TB, cfg Config) (*Relay, string, func(life time.Duration, subject string, scopes ...auth.Scope) string) {
	t.Helper()
	key, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	v := &auth.Verifier{Issuer: "sea", Keys: []ed25519.PublicKey{key.Public()}, Leeway: 30 * time.Second}
	mint := func(life time.Duration, subject string, scopes ...auth.Scope) string {
		tok, err := auth.Mint(key, auth.Claims{Issuer: "sea", Subject: subject, Scopes: scopes, IssuedAt: time.Now(), Expires: time.Now().Add(life)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	cfg.Host = "127.0.0.1"
	if cfg.Recheck == nil {
		cfg.Recheck = func(tok string) error { _, err := v.Verify(tok); return err }
	}
	r := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.Handle("POST "+api.PathRelayAttach, auth.Require(v, auth.Daemon, r.ServeAttach(ctx)))
	mux.Handle("POST "+api.PathRelayCheck, auth.Require(v, auth.Daemon, ServeCheck()))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		cancel()
		r.Close()
		srv.Close()
	})
	return r, srv.Listener.Addr().String(), mint
}

// serveHTTP answers every request on ln with the caller's address.
func serveHTTP(t testing.TB, ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.RemoteAddr)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

func get(url string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestTunnel attaches a worker: a connection to its API address on the
// relay reaches the worker's listener with the caller's own address; the
// relay dropping the tunnel makes the worker attach again to the same
// addresses, which work again.
func TestTunnel(t *testing.T) {
	r, relayAddr, mint := testRelay(t, Config{Name: "cm"})
	tok := mint(time.Hour, "node/w1", auth.Daemon)
	c, err := Connect(t.Context(), &Dialer{Relay: relayAddr, Name: "w1", Token: func() string { return tok }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	a := c.Addrs()
	if a.Relay != "cm" || !strings.HasPrefix(a.API, "127.0.0.1:") || a.API == a.Tree || a.API == a.Gossip {
		t.Fatalf("addresses %+v", a)
	}
	serveHTTP(t, c.API())
	conn, err := net.Dial("tcp", a.API)
	if err != nil {
		t.Fatal(err)
	}
	local := conn.LocalAddr().String()
	fmt.Fprintf(conn, "GET / HTTP/1.0\r\n\r\n")
	body, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.HasSuffix(string(body), local) {
		t.Errorf("the worker saw the caller as %q, want %s", body, local)
	}

	attached := make(chan api.RelayAddrs, 2)
	c.OnAttach(func(a api.RelayAddrs) { attached <- a })
	if !r.Drop("w1") {
		t.Fatal("Drop found no tunnel")
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Attaches() < 2 || !c.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("the worker did not attach again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// OnAttach hears of the tunnel opened again, with its addresses.
	select {
	case got := <-attached:
		if got != a {
			t.Errorf("OnAttach told %+v, want %+v", got, a)
		}
	case <-time.After(5 * time.Second):
		t.Error("OnAttach not told of the tunnel opened again")
	}
	if c.Addrs() != a {
		t.Errorf("addresses after reconnecting %+v, want %+v", c.Addrs(), a)
	}
	if got, err := get("http://" + a.API + "/"); err != nil || got == "" {
		t.Errorf("after reconnecting: %q, %v", got, err)
	}
	if ws := r.Workers(); len(ws) != 1 || !ws[0].Connected || ws[0].Addrs != a {
		t.Errorf("relay's workers %+v", ws)
	}
}

// TestAttachRefused: only a node's own token opens its tunnel, and a full
// relay refuses more workers.
func TestAttachRefused(t *testing.T) {
	_, relayAddr, mint := testRelay(t, Config{Name: "cm", MaxWorkers: 1})
	for _, tc := range []struct {
		name, worker, token string
		status              int
	}{
		{"no token", "w1", "", http.StatusUnauthorized},
		{"user token", "w1", mint(time.Hour, "alice", auth.Daemon), http.StatusForbidden},
		{"another node's token", "w1", mint(time.Hour, "node/w2", auth.Daemon), http.StatusForbidden},
		{"node token without DAEMON", "w1", mint(time.Hour, "node/w1", auth.SeaRead), http.StatusForbidden},
		{"node token expired within the leeway", "w1", mint(-5*time.Second, "node/w1", auth.Daemon), http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Dialer{Relay: relayAddr, Name: tc.worker, Token: func() string { return tc.token }}
			_, _, err := d.Dial(t.Context(), api.RelayAddrs{})
			var se *StatusError
			if !errors.As(err, &se) || se.Status != tc.status {
				t.Fatalf("Dial: %v, want status %d", err, tc.status)
			}
			t.Logf("refused: %v", err)
		})
	}
	tok1 := mint(time.Hour, "node/w1", auth.Daemon)
	c, err := Connect(t.Context(), &Dialer{Relay: relayAddr, Name: "w1", Token: func() string { return tok1 }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	tok2 := mint(time.Hour, "node/w2", auth.Daemon)
	_, _, err = (&Dialer{Relay: relayAddr, Name: "w2", Token: func() string { return tok2 }}).Dial(t.Context(), api.RelayAddrs{})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable || !strings.Contains(se.Msg, "as many workers") {
		t.Fatalf("second worker on a relay of one: %v, want 503", err)
	}
}

// TestAttachToStoppingRelay: a relay whose context is done (its agent
// stops, its API still answering) refuses a worker with 503, which the
// worker takes for "try again", rather than opening a tunnel it would
// drop at once.
func TestAttachToStoppingRelay(t *testing.T) {
	key, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	v := &auth.Verifier{Issuer: "sea", Keys: []ed25519.PublicKey{key.Public()}}
	tok, err := auth.Mint(key, auth.Claims{Issuer: "sea", Subject: "node/w1", Scopes: []auth.Scope{auth.Daemon}, IssuedAt: time.Now(), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Config{Name: "cm", Host: "127.0.0.1"})
	t.Cleanup(func() { r.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	mux := http.NewServeMux()
	mux.Handle("POST "+api.PathRelayAttach, auth.Require(v, auth.Daemon, r.ServeAttach(ctx)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, _, err = (&Dialer{Relay: srv.Listener.Addr().String(), Name: "w1", Token: func() string { return tok }}).Dial(t.Context(), api.RelayAddrs{})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable || !strings.Contains(se.Msg, "stopping") {
		t.Fatalf("Dial to a stopping relay: %v, want 503", err)
	}
	if ws := r.Workers(); len(ws) != 0 {
		t.Errorf("a stopping relay took workers %+v", ws)
	}
}

// TestGossipThroughTunnel runs memberlist on the relay's host and on a
// worker whose only gossip transport is the tunnel: they join, see each
// other alive, and a gossip target outside the sea is refused.
func TestGossipThroughTunnel(t *testing.T) {
	mc := memberlist.DefaultLocalConfig()
	mc.Name, mc.BindAddr, mc.BindPort = "cm", "127.0.0.1", 0
	mc.LogOutput = io.Discard
	cm, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cm.Shutdown() })
	cmAddr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), cm.LocalNode().Port)
	allow := func(to netip.AddrPort) bool { return to == cmAddr }
	_, relayAddr, mint := testRelay(t, Config{Name: "cm", AllowSend: allow})
	tok := mint(time.Hour, "node/w1", auth.Daemon)
	c, err := Connect(t.Context(), &Dialer{Relay: relayAddr, Name: "w1", Token: func() string { return tok }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	wc := memberlist.DefaultLocalConfig()
	wc.Name, wc.Transport = "w1", c.Gossip()
	wc.LogOutput = io.Discard
	w, err := memberlist.Create(wc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown() })
	if got := w.LocalNode().Address(); got != c.Addrs().Gossip {
		t.Fatalf("the worker advertises %s, want its relay address %s", got, c.Addrs().Gossip)
	}
	if _, err := w.Join([]string{cmAddr.String()}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive := 0
		for _, m := range cm.Members() {
			if m.Name == "w1" && m.State == memberlist.StateAlive && m.Address() == c.Addrs().Gossip {
				alive++
			}
		}
		if alive == 1 && w.NumMembers() == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cm sees %v, worker sees %d members", cm.Members(), w.NumMembers())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Probes in both directions keep the worker alive for a while.
	time.Sleep(2 * time.Second)
	for _, m := range cm.Members() {
		if m.Name == "w1" && m.State != memberlist.StateAlive {
			t.Errorf("cm sees the worker %v after probing it", m.State)
		}
	}
	if _, err := c.Gossip().DialTimeout("127.0.0.1:1", time.Second); err == nil {
		t.Error("the relay opened a connection to an address outside the sea")
	}
}

// TestGrace: a worker gone keeps its addresses for the grace period, and
// a connection to it meanwhile waits for it; past the grace period the
// relay lets the addresses go.
func TestGrace(t *testing.T) {
	r, relayAddr, mint := testRelay(t, Config{Name: "cm", Grace: 2 * time.Second})
	tok := mint(time.Hour, "node/w1", auth.Daemon)
	d := &Dialer{Relay: relayAddr, Name: "w1", Token: func() string { return tok }}
	c, err := Connect(t.Context(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Addrs()
	c.Close()
	waitGone := time.Now().Add(5 * time.Second)
	for {
		ws := r.Workers()
		if len(ws) == 1 && !ws[0].Connected {
			break
		}
		if time.Now().After(waitGone) {
			t.Fatalf("workers after the tunnel closed: %+v", ws)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A call made while the worker is away waits for it; the worker
	// (a new process, say) comes back within the grace period, gets its
	// addresses again, and answers the call.
	got := make(chan error, 1)
	go func() {
		_, err := get("http://" + a.API + "/")
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	c2, err := Connect(t.Context(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Addrs() != a {
		t.Errorf("back within the grace period with %+v, want %+v", c2.Addrs(), a)
	}
	serveHTTP(t, c2.API())
	if err := <-got; err != nil {
		t.Errorf("the call made while the worker was away: %v", err)
	}
	c2.Close()
	// Past the grace period the addresses are let go.
	deadline := time.Now().Add(10 * time.Second)
	for len(r.Workers()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("workers past the grace period: %+v", r.Workers())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c, err := net.DialTimeout("tcp", a.API, time.Second); err == nil {
		c.Close()
		t.Errorf("the relay still listens on %s past the grace period", a.API)
	}
}

// TestNoTokenInClear: without TLS a worker sends its token only to a
// relay on loopback.
func TestNoTokenInClear(t *testing.T) {
	d := &Dialer{Relay: "192.0.2.1:7947", Name: "w1", Token: func() string { return "secret" }}
	if _, _, err := d.Dial(t.Context(), api.RelayAddrs{}); err == nil || !strings.Contains(err.Error(), "in clear") {
		t.Errorf("Dial: %v, want a refusal to send the token in clear", err)
	}
	if _, err := d.Check(t.Context(), "192.0.2.2:1"); err == nil || !strings.Contains(err.Error(), "in clear") {
		t.Errorf("Check: %v, want a refusal to send the token in clear", err)
	}
}

// TestTunnelLastsItsToken: a tunnel opened with a token closes when the
// token expires, and the worker opens another with the token it holds
// then, keeping its addresses.
func TestTunnelLastsItsToken(t *testing.T) {
	_, relayAddr, mint := testRelay(t, Config{Name: "cm"})
	var mu sync.Mutex
	tok := mint(1500*time.Millisecond, "node/w1", auth.Daemon)
	token := func() string { mu.Lock(); defer mu.Unlock(); return tok }
	c, err := Connect(t.Context(), &Dialer{Relay: relayAddr, Name: "w1", Token: token}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	a := c.Addrs()
	mu.Lock()
	tok = mint(time.Hour, "node/w1", auth.Daemon)
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for c.Attaches() < 2 || !c.Connected() {
		if time.Now().After(deadline) {
			t.Fatalf("the tunnel was not renewed at its token's expiry: %d attaches", c.Attaches())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c.Addrs() != a {
		t.Errorf("addresses after the renewal %+v, want %+v", c.Addrs(), a)
	}
}

// TestRevokedTunnelCloses: a tunnel whose token no longer passes its check
// (revoked) is closed at the next check. (Opening another with it is
// refused by the route's token check, as any call with a revoked token.)
func TestRevokedTunnelCloses(t *testing.T) {
	var revoked atomic.Bool
	_, relayAddr, mint := testRelay(t, Config{Name: "cm", RecheckEvery: 100 * time.Millisecond, Recheck: func(string) error {
		if revoked.Load() {
			return errors.New("token revoked")
		}
		return nil
	}})
	tok := mint(time.Hour, "node/w1", auth.Daemon)
	c, err := Connect(t.Context(), &Dialer{Relay: relayAddr, Name: "w1", Token: func() string { return tok }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	revoked.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for c.Attaches() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the tunnel of a revoked token stayed open")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCheck: the connect-back check tells an address that accepts
// connections from one that does not, refuses an address that would find
// the relay itself, and dials no host but the one asking.
func TestCheck(t *testing.T) {
	_, relayAddr, mint := testRelay(t, Config{Name: "cm"})
	tok := mint(time.Hour, "node/w1", auth.Daemon)
	d := &Dialer{Relay: relayAddr, Name: "w1", Token: func() string { return tok }}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := ln.Addr().String()
	if res, err := d.Check(t.Context(), open); err != nil || !res.Reachable {
		t.Errorf("check of a listening address: %+v, %v", res, err)
	}
	ln.Close()
	if res, err := d.Check(t.Context(), open); err != nil || res.Reachable {
		t.Errorf("check of a closed address: %+v, %v", res, err)
	}
	for _, bad := range []string{"0.0.0.0:1", "[::]:1", "nowhere:1"} {
		var se *StatusError
		if _, err := d.Check(t.Context(), bad); !errors.As(err, &se) || se.Status != http.StatusBadRequest {
			t.Errorf("check of %s: %v, want 400", bad, err)
		}
	}
	// Another host's port, open or not, is never dialled: the answer is
	// no, saying why (the worker would be behind a NAT).
	if res, err := d.Check(t.Context(), "192.0.2.2:22"); err != nil || res.Reachable || !strings.Contains(res.Error, "come from 127.0.0.1") {
		t.Errorf("check of another host's address: %+v, %v", res, err)
	}
	other := &Dialer{Relay: relayAddr, Name: "w2", Token: func() string { return tok }}
	var se *StatusError
	if _, err := other.Check(t.Context(), open); !errors.As(err, &se) || se.Status != http.StatusForbidden {
		t.Errorf("check about w2 with w1's token: %v, want 403", err)
	}
}

// TestCheckAlso: the connect-back check of a worker's other addresses
// (its tree and gossip ports) says no, naming them, when any of them does
// not accept connections, though its API port does; the other addresses
// obey the API address's rules.
func TestCheckAlso(t *testing.T) {
	_, relayAddr, mint := testRelay(t, Config{Name: "cm"})
	tok := mint(time.Hour, "node/w1", auth.Daemon)
	d := &Dialer{Relay: relayAddr, Name: "w1", Token: func() string { return tok }}
	listen := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln.Addr().String()
	}
	api, tree, gossip := listen(), listen(), listen()
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		return ln.Addr().String()
	}()
	for _, tc := range []struct {
		name        string
		also        []string
		reachable   bool
		unreachable []string
	}{
		{"all open", []string{tree, gossip}, true, nil},
		{"gossip closed", []string{tree, closed}, false, []string{closed}},
		{"another host", []string{"192.0.2.2:7946"}, false, []string{"192.0.2.2:7946"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := d.Check(t.Context(), api, tc.also...)
			if err != nil || res.Reachable != tc.reachable || fmt.Sprint(res.Unreachable) != fmt.Sprint(tc.unreachable) || (!tc.reachable && res.Error == "") {
				t.Errorf("check of %s and %v: %+v, %v; want reachable %v, unreachable %v", api, tc.also, res, err, tc.reachable, tc.unreachable)
			}
		})
	}
	var se *StatusError
	for _, bad := range [][]string{{"0.0.0.0:1"}, {"nowhere:1"}, {tree, tree, tree, tree, tree}} {
		if _, err := d.Check(t.Context(), api, bad...); !errors.As(err, &se) || se.Status != http.StatusBadRequest {
			t.Errorf("check of also %v: %v, want 400", bad, err)
		}
	}
}
