package wire

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// TestClientTLS calls a TLS server of a sea's CA and a plain one with
// clients with and without the sea's TLS: only the matching pairs talk,
// the others fail with errors that say which side speaks TLS, and a TLS
// client never sends a request in plain text, even to an http:// URL.
func TestClientTLS(t *testing.T) {
	a, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key, ca, err := a.WriteCertificate(dir, "node", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srvTLS, err := auth.ServerTLS(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		WriteJSON(w, http.StatusOK, map[string]bool{"tls": r.TLS != nil})
	})
	plain := httptest.NewServer(h)
	defer plain.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secure := &http.Server{Handler: h, TLSConfig: srvTLS}
	go secure.ServeTLS(ln, "", "")
	defer secure.Close()
	tlsAddr, plainAddr := ln.Addr().String(), strings.TrimPrefix(plain.URL, "http://")
	cliTLS, err := auth.ClientTLS(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		c       *Client
		want    error // nil: a success over TLS as the client speaks it
		reaches bool  // the request reaches the handler
	}{
		{name: "TLS to TLS", c: NewClient(tlsAddr, "tok").WithTLS(cliTLS), reaches: true},
		{name: "plain to plain", c: NewClient(plainAddr, "tok"), reaches: true},
		{name: "TLS to plain", c: NewClient(plainAddr, "tok").WithTLS(cliTLS), want: ErrNotTLS},
		{name: "TLS to an http URL", c: NewClient("http://"+tlsAddr, "tok").WithTLS(cliTLS), want: ErrNotTLS},
		{name: "plain to TLS", c: NewClient(tlsAddr, "tok"), want: ErrPlainToTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := requests.Load()
			var out map[string]bool
			err := tc.c.Do(t.Context(), http.MethodGet, "/x", nil, &out)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("error %v, want %v", err, tc.want)
				}
			} else if err != nil || out["tls"] != (tc.c.TLS != nil) {
				t.Fatalf("answer %v, error %v", out, err)
			}
			if got := requests.Load() > before; got != tc.reaches {
				t.Errorf("the request reached the handler: %v, want %v", got, tc.reaches)
			}
		})
	}
	first := tlsTransport(cliTLS, 0)
	if again := tlsTransport(cliTLS, 0); again != first {
		t.Error("clients of one TLS configuration do not share a transport")
	}
}

// slowAccept is a listener whose connections are handed to the server
// after delay, as a saturated server gets to a new connection late.
type slowAccept struct {
	net.Listener
	delay time.Duration
}

func (l slowAccept) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		time.Sleep(l.delay)
	}
	return c, err
}

// TestHandshakeTimeout: a client's TLS handshake is bounded by its
// HandshakeTimeout, DefaultHandshakeTimeout when unset; a call whose
// handshake timed out was not sent (ErrNotSent), and a client that waits
// longer than the server's delay gets its answer.
func TestHandshakeTimeout(t *testing.T) {
	a, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, ca, err := a.WriteCertificate(t.TempDir(), "node", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srvTLS, err := auth.ServerTLS(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
	}), TLSConfig: srvTLS}
	go srv.ServeTLS(slowAccept{ln, 600 * time.Millisecond}, "", "")
	defer srv.Close()
	cliTLS, err := auth.ClientTLS(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := tlsTransport(cliTLS, 0).TLSHandshakeTimeout; got != DefaultHandshakeTimeout {
		t.Errorf("a client without a handshake timeout waits %v, want %v", got, DefaultHandshakeTimeout)
	}
	for _, tc := range []struct {
		name      string
		handshake time.Duration
		ok        bool
	}{
		{"shorter than the server's delay", 100 * time.Millisecond, false},
		{"longer than the server's delay", 5 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClient(ln.Addr().String(), "tok").WithTLS(cliTLS).WithHandshakeTimeout(tc.handshake)
			var out map[string]bool
			err := c.Do(t.Context(), http.MethodGet, "/x", nil, &out)
			if tc.ok && (err != nil || !out["ok"]) {
				t.Fatalf("answer %v, error %v", out, err)
			}
			if !tc.ok && !errors.Is(err, ErrNotSent) {
				t.Fatalf("error %v, want the handshake's timeout, not sent", err)
			}
		})
	}
}
