package relay

import (
	"context"
	"crypto/ed25519"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

// TestRelayRestart restarts a relay under a connected worker, on the same
// attach address, as an agent restarted on its data directory is. Where
// the relay can bind the worker's ports again, the worker keeps its
// addresses; where another program took them, the relay gives new ones
// and the worker follows: Addrs, its listeners and OnAddrs say the new
// ones, and calls to them reach it.
func TestRelayRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taken bool
	}{
		{"ports free", false},
		{"ports taken", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := auth.NewSigningKey()
			if err != nil {
				t.Fatal(err)
			}
			v := &auth.Verifier{Issuer: "sea", Keys: []ed25519.PublicKey{key.Public()}, Leeway: 30 * time.Second}
			tok, err := auth.Mint(key, auth.Claims{Issuer: "sea", Subject: "node/w1", Scopes: []auth.Scope{auth.Daemon},
				IssuedAt: time.Now(), Expires: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			// cur is the relay running now, with the context its attach
			// route serves under.
			type running struct {
				r      *Relay
				ctx    context.Context
				cancel context.CancelFunc
			}
			var cur atomic.Pointer[running]
			start := func() {
				ctx, cancel := context.WithCancel(context.Background())
				cur.Store(&running{r: New(Config{Name: "cm", Host: "127.0.0.1"}), ctx: ctx, cancel: cancel})
			}
			stop := func() {
				run := cur.Load()
				run.cancel()
				run.r.Close()
			}
			start()
			attach := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				run := cur.Load()
				run.r.ServeAttach(run.ctx).ServeHTTP(w, req)
			})
			mux := http.NewServeMux()
			mux.Handle("POST "+api.PathRelayAttach, auth.Require(v, auth.Daemon, attach))
			srv := httptest.NewServer(mux)
			t.Cleanup(func() {
				stop()
				srv.Close()
			})

			c, err := Connect(t.Context(), &Dialer{Relay: srv.Listener.Addr().String(), Name: "w1", Token: func() string { return tok }}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			changed := make(chan api.RelayAddrs, 4)
			c.OnAddrs(func(a api.RelayAddrs) { changed <- a })
			serveHTTP(t, c.API())
			before := c.Addrs()

			stop()
			if tc.taken {
				for _, a := range []string{before.API, before.Tree, before.Gossip} {
					ln, err := net.Listen("tcp", a)
					if err != nil {
						t.Fatalf("taking %s: %v", a, err)
					}
					t.Cleanup(func() { ln.Close() })
				}
			}
			start()

			deadline := time.Now().Add(15 * time.Second)
			for c.Attaches() < 2 || !c.Connected() {
				if time.Now().After(deadline) {
					t.Fatal("the worker did not attach to the restarted relay")
				}
				time.Sleep(20 * time.Millisecond)
			}
			after := c.Addrs()
			if !tc.taken {
				if after != before {
					t.Errorf("addresses after the relay's restart %+v, want the ones it had, %+v", after, before)
				}
				select {
				case a := <-changed:
					t.Errorf("OnAddrs called with %+v though the addresses stayed", a)
				default:
				}
			} else {
				if after.API == before.API || after.Tree == before.Tree || after.Gossip == before.Gossip {
					t.Errorf("addresses after the relay's restart %+v, want new ones: %+v are taken", after, before)
				}
				select {
				case a := <-changed:
					if a != after {
						t.Errorf("OnAddrs said %+v, Addrs %+v", a, after)
					}
				case <-time.After(5 * time.Second):
					t.Error("OnAddrs not called for the new addresses")
				}
				if got := c.API().Addr().String(); got != after.API {
					t.Errorf("API listener's address %s, want %s", got, after.API)
				}
				if got := c.Tree().Addr().String(); got != after.Tree {
					t.Errorf("tree listener's address %s, want %s", got, after.Tree)
				}
				if ap, port, err := c.Gossip().FinalAdvertiseAddr("", 0); err != nil || net.JoinHostPort(ap.String(), strconv.Itoa(port)) != after.Gossip {
					t.Errorf("gossip advertises %s:%d (%v), want %s", ap, port, err, after.Gossip)
				}
			}
			if got, err := get("http://" + after.API + "/"); err != nil || got == "" {
				t.Errorf("calling the worker at %s after the relay's restart: %q, %v", after.API, got, err)
			}
			if ws := cur.Load().r.Workers(); len(ws) != 1 || ws[0].Addrs != after {
				t.Errorf("restarted relay's workers %+v, want w1 on %+v", ws, after)
			}
		})
	}
}
