package factory

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

// TestFactorySitesShareSpotPrices builds the EC2 sites of two factory
// entries as the agent's factory does (SiteMaker) on moto, behind a proxy
// that counts the DescribeSpotPriceHistory requests, and asks each for its
// prices every "cycle": one request for both entries and all the cycles.
// Sites built apart (NewSite, as pondctl's own) ask once each.
func TestFactorySitesShareSpotPrices(t *testing.T) {
	t.Parallel()
	endpoint := ec2test.StartMoto(t)
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if v, err := url.ParseQuery(string(body)); err == nil && v.Get("Action") == "DescribeSpotPriceHistory" {
			requests.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	cfg, _ := json.Marshal(ec2.Config{Endpoint: srv.URL, Region: ec2test.Region, AMI: "ami-00000000",
		InstanceTypes: []string{"t3.micro", "c7i.large"}, Spot: true})
	entry := func(name string) api.FactoryEntrySpec {
		return api.FactoryEntrySpec{Name: name, Site: api.FactorySite{Kind: "aws", Config: cfg}}
	}
	cycles := func(mk func(api.FactoryEntrySpec) (glidein.Site, error)) int64 {
		t.Helper()
		requests.Store(0)
		var sites []glidein.Site
		for _, name := range []string{"burst", "gpu"} {
			s, err := mk(entry(name))
			if err != nil {
				t.Fatal(err)
			}
			sites = append(sites, s)
		}
		for range 5 {
			for _, s := range sites {
				ps, err := s.(glidein.Pricer).Prices(context.Background())
				if err != nil || len(ps) != 2 || !ps[0].Spot {
					t.Fatalf("prices %+v (%v), want the spot price history's", ps, err)
				}
			}
		}
		return requests.Load()
	}
	if n := cycles(SiteMaker(nil)); n != 1 {
		t.Errorf("the factory's two entries, five cycles: %d DescribeSpotPriceHistory requests, want 1", n)
	}
	if n := cycles(NewSite); n != 2 {
		t.Errorf("two sites apart, five cycles: %d requests, want 2 (one each)", n)
	}
}
