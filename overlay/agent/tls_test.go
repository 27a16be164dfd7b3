package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// testAuthority opens a new authority (a sea's CA) in a temporary
// directory.
func testAuthority(t testing.TB) *auth.Authority {
	t.Helper()
	a, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	// The authority makes its CA with its first certificate.
	if _, _, err := a.IssueCertificate("first", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	return a
}

// withCert gives cfg a certificate of a for its node, as the local
// provider does, and returns cfg.
func withCert(t testing.TB, a *auth.Authority, cfg *Config) *Config {
	t.Helper()
	dir := filepath.Join(t.TempDir(), cfg.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var err error
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA, err = a.WriteCertificate(dir, cfg.Name, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTLSAPI runs agents with certificates of a sea's CA: their API
// speaks only TLS, to clients that verify it with the CA, and their tree
// queries reach each other over mutual TLS. A plain client, and a TLS
// client of a plain agent, fail with errors that say why.
func TestTLSAPI(t *testing.T) {
	t.Parallel()
	sea := testAuthority(t)
	agents := startAgents(t,
		withCert(t, sea, &Config{Name: "tls-0", Role: "node", Attrs: map[string]any{"Sea": true}}),
		withCert(t, sea, &Config{Name: "tls-1", Role: "node", Attrs: map[string]any{"Sea": true}}))
	clientTLS, err := auth.ClientTLS(sea.CAFile(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(agents[0].APIAddr()).WithTLS(clientTLS)
	if h, err := c.Health(t.Context()); err != nil || h.Name != "tls-0" {
		t.Fatalf("health over TLS: %+v, %v", h, err)
	}
	// The tree query crosses to the other agent over mutual TLS.
	var ans *api.Answer
	waitFor(t, 20*time.Second, "a tree query that finds both agents", func() error {
		ans, err = c.Query(t.Context(), api.Query{Requirements: "TARGET.Sea", K: 10, Deadline: time.Now().Add(2 * time.Second)})
		if err != nil {
			return err
		}
		if len(ans.Matches) != 2 {
			return errors.New("matches: " + matchNames(ans))
		}
		return nil
	})

	// A plain client is refused, and told why.
	_, err = api.NewClient(agents[0].APIAddr()).Health(t.Context())
	if !errors.Is(err, wire.ErrPlainToTLS) || !strings.Contains(err.Error(), "sea's CA") {
		t.Fatalf("plain client of a TLS agent: %v", err)
	}
	// A client of the sea's CA at a plain agent is refused, and told why.
	plain := startAgents(t, &Config{Name: "plain", Role: "node"})[0]
	_, err = api.NewClient(plain.APIAddr()).WithTLS(clientTLS).Health(t.Context())
	if !errors.Is(err, wire.ErrNotTLS) || !strings.Contains(err.Error(), "-tls-cert") {
		t.Fatalf("TLS client of a plain agent: %v", err)
	}
	// So is one of another CA.
	foreign, err := auth.ClientTLS(testAuthority(t).CAFile(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.NewClient(agents[0].APIAddr()).WithTLS(foreign).Health(t.Context())
	if !errors.Is(err, auth.ErrNotInSea) {
		t.Fatalf("client of another CA: %v", err)
	}
}

func matchNames(ans *api.Answer) string {
	var names []string
	for _, m := range ans.Matches {
		names = append(names, m.Name)
	}
	return strings.Join(names, ",")
}

// TestTokenStaysWithTheSea serves the API of a node of another sea (a
// certificate of another CA) with a handler that records every
// Authorization header it is sent: a client of the sea's CA that holds a
// token refuses the server before it sends anything, so the server never
// sees the token. A server of the sea does see it.
func TestTokenStaysWithTheSea(t *testing.T) {
	sea, other := testAuthority(t), testAuthority(t)
	var (
		mu   sync.Mutex
		seen []string
	)
	serve := func(a *auth.Authority, name string) string {
		cfg := withCert(t, a, &Config{Name: name})
		srvTLS, err := auth.ServerTLS(cfg.TLSCert, cfg.TLSKey, cfg.TLSCA)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{TLSConfig: srvTLS, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, name+": "+r.Header.Get("Authorization"))
			mu.Unlock()
			wire.WriteJSON(w, http.StatusOK, api.Health{Name: name})
		})}
		go srv.ServeTLS(ln, "", "")
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	intruder, member := serve(other, "intruder"), serve(sea, "member")
	clientTLS, err := auth.ClientTLS(sea.CAFile(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.NewClient(intruder).WithTLS(clientTLS).WithToken("secret-token").Health(t.Context())
	if !errors.Is(err, auth.ErrNotInSea) {
		t.Fatalf("call to a server of another CA: %v", err)
	}
	if _, err := api.NewClient(member).WithTLS(clientTLS).WithToken("secret-token").Health(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "member: Bearer secret-token" {
		t.Fatalf("the servers saw %q; want only the member, with the token", seen)
	}
}

// TestPlainAPIWarning starts an agent whose API listens on every address
// without TLS: it says loudly that it does and how to fix it. With TLS, or
// on loopback, it does not.
func TestPlainAPIWarning(t *testing.T) {
	t.Parallel()
	sea := testAuthority(t)
	for _, tc := range []struct {
		name string
		api  string
		tls  bool
		warn bool
	}{
		{"plain on every address", "0.0.0.0:0", false, true},
		{"TLS on every address", "0.0.0.0:0", true, false},
		{"plain on loopback", "127.0.0.1:0", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Name: "warned", Role: "node"}
			if tc.tls {
				withCert(t, sea, cfg)
			}
			cfg.Bind, cfg.API, cfg.GossipProfile, cfg.DataDir = "127.0.0.1:0", tc.api, "fast", t.TempDir()
			cfg.InsecureAPI = true
			var (
				mu  sync.Mutex
				log strings.Builder
			)
			logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &log}, nil))
			ctx, cancel := context.WithCancel(t.Context())
			a, err := New(ctx, cfg, logger)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { a.Run(ctx); close(done) }()
			waitFor(t, 10*time.Second, "the agent to start", func() error {
				mu.Lock()
				defer mu.Unlock()
				if !strings.Contains(log.String(), "agent started") {
					return errors.New("not yet")
				}
				return nil
			})
			cancel()
			<-done
			mu.Lock()
			defer mu.Unlock()
			if got := strings.Contains(log.String(), "INSECURE") && strings.Contains(log.String(), "-tls-cert"); got != tc.warn {
				t.Errorf("warned %v, want %v; log:\n%s", got, tc.warn, log.String())
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
