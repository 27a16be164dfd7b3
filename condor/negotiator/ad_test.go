package negotiator

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

// TestAdShowsWhereAndHowBusy checks that the negotiator's ad carries what
// HTCondor's tools read of every daemon's ad (`htcondor cm status`):
// Machine, MyAddress and RecentDaemonCoreDutyCycle.
func TestAdShowsWhereAndHowBusy(t *testing.T) {
	coll := collector.New(collector.Options{})
	mux := http.NewServeMux()
	prefix := wire.PathPrefix + "collector"
	mux.Handle(prefix+"/", http.StripPrefix(prefix, coll.Handler()))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	n, err := New(Options{Config: config.New(config.Options{}), Name: "cm1", Address: "127.0.0.1:9618",
		Collector: func() string { return addr }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := n.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeNegotiator})
	if err != nil || len(resp.Ads) != 1 {
		t.Fatalf("negotiator ads: %v, %v", resp, err)
	}
	ad, err := wire.ToClassAd(resp.Ads[0])
	if err != nil {
		t.Fatal(err)
	}
	m, _ := ad.EvalAttr("Machine").StringValue()
	a, _ := ad.EvalAttr("MyAddress").StringValue()
	d, ok := ad.EvalAttr("RecentDaemonCoreDutyCycle").RealValue()
	if m != "cm1" || a != "<127.0.0.1:9618>" || !ok || d < 0 || d > 1 {
		t.Errorf("Machine %q MyAddress %q RecentDaemonCoreDutyCycle %v (%v)", m, a, d, ok)
	}
}

// TestLocalCollectorSkipsTheWire runs a cycle against a collector that
// also runs in the negotiator's process (LocalCollector) and against one
// reached only over HTTP: both see the same unclaimed slots, and the
// in-process one answers the cycle's queries without a request on the
// wire (the negotiator's own ad still goes over it, to be recorded by
// the collector's handler).
func TestLocalCollectorSkipsTheWire(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(map[bool]string{false: "over the wire", true: "in process"}[local], func(t *testing.T) {
			ctx := context.Background()
			coll := collector.New(collector.Options{})
			var ads []wire.Ad
			private := map[string]wire.Ad{}
			for i := range 3 {
				name := fmt.Sprintf(`"slot%d@exec"`, i+1)
				ads = append(ads, wire.Ad{"MyType": `"Machine"`, "Name": name, "State": `"Unclaimed"`, "Cpus": "1",
					"Memory": "1024", "PondAddress": `"127.0.0.1:1"`, "Requirements": "true"})
				private[strings.Trim(name, `"`)] = wire.Ad{"ClaimId": fmt.Sprintf(`"claim%d"`, i+1)}
			}
			if _, err := coll.Update(ctx, &wire.UpdateRequest{Type: wire.TypeMachine, Source: "exec", Ads: ads, Private: private}); err != nil {
				t.Fatal(err)
			}
			var queries atomic.Int32
			mux := http.NewServeMux()
			prefix := wire.PathPrefix + "collector"
			h := http.StripPrefix(prefix, coll.Handler())
			mux.Handle(prefix+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/query") {
					queries.Add(1)
				}
				h.ServeHTTP(w, r)
			}))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			addr := srv.Listener.Addr().String()
			opts := Options{Config: config.New(config.Options{}), Name: "cm1", Address: addr, Collector: func() string { return addr }}
			if local {
				opts.LocalCollector = func(a string) Querier {
					if a != addr {
						return nil
					}
					return coll
				}
			}
			n, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			st, err := n.Cycle(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Slots != 3 {
				t.Errorf("the cycle saw %d unclaimed slots, want 3", st.Slots)
			}
			if got := queries.Load(); local && got != 0 || !local && got == 0 {
				t.Errorf("%d queries over the wire", got)
			}
			if resp, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeNegotiator}); err != nil || len(resp.Ads) != 1 {
				t.Errorf("the negotiator's ad: %v, %v", resp, err)
			}
		})
	}
}
