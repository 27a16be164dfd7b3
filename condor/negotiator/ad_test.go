package negotiator

import (
	"context"
	"net/http"
	"net/http/httptest"
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
