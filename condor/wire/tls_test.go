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
	first := tlsTransport(cliTLS)
	if again := tlsTransport(cliTLS); again != first {
		t.Error("clients of one TLS configuration do not share a transport")
	}
}
