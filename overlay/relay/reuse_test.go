package relay

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// TestTunnelKeepsConnections: HTTP calls through the relay reuse their
// connection, as they would direct.
func TestTunnelKeepsConnections(t *testing.T) {
	_, relayAddr, mint := testRelay(t, Config{Name: "cm"})
	tok := mint(time.Hour, "node/w1", auth.Daemon)
	c, err := Connect(t.Context(), &Dialer{Relay: relayAddr, Name: "w1", Token: func() string { return tok }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var conns atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	go srv.Serve(c.API())
	t.Cleanup(func() { srv.Close() })
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: tr}
	for range 10 {
		resp, err := hc.Get("http://" + c.Addrs().API + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("ten calls through the relay opened %d connections, want 1", n)
	}
}

// TestTunnelKeepsTLSConnections: HTTPS calls through the relay reuse
// their connection too; the HTTP server's deadline at the end of each
// request must not break the TLS connection under it.
func TestTunnelKeepsTLSConnections(t *testing.T) {
	_, relayAddr, mint := testRelay(t, Config{Name: "cm"})
	tok := mint(time.Hour, "node/w1", auth.Daemon)
	c, err := Connect(t.Context(), &Dialer{Relay: relayAddr, Name: "w1", Token: func() string { return tok }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}))
	srv.Listener.Close()
	srv.Listener = c.API()
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: tr}
	for i := range 10 {
		resp, err := hc.Get("https://" + c.Addrs().API + "/")
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("ten calls through the relay opened %d connections, want 1", n)
	}
}
