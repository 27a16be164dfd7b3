package ec2

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
)

func TestOnDemandPrice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		region, typ string
		want        float64
		ok          bool
	}{
		{"us-east-1", "t3.micro", 0.0104, true},
		{"us-east-1", "t3.nano", 0.0052, true},
		{"us-east-1", "t3.2xlarge", 0.3328, true},
		{"us-east-1", "m5.large", 0.096, true},
		{"us-east-1", "m5.24xlarge", 4.608, true},
		{"us-east-1", "m6i.32xlarge", 6.144, true},
		{"us-east-1", "m7i.48xlarge", 9.6768, true},
		{"us-east-1", "c5.9xlarge", 1.53, true},
		{"us-east-1", "c6i.large", 0.085, true},
		{"us-east-1", "c7i.large", 0.08925, true},
		{"us-east-1", "c7i.4xlarge", 0.714, true},
		{"us-east-1", "r5.xlarge", 0.252, true},
		{"us-east-1", "r6i.2xlarge", 0.504, true},
		{"us-east-1", "g4dn.xlarge", 0.526, true},
		{"us-east-1", "g4dn.12xlarge", 3.912, true},
		{"us-east-1", "p3.2xlarge", 3.06, true},
		{"us-east-1", "p3.16xlarge", 24.48, true},
		{"us-west-2", "c7i.large", 0.08925, true},
		{"us-east-2", "r5.large", 0.126, true},
		{"eu-west-1", "m5.large", 0.107, true},
		{"eu-west-1", "t3.micro", 0.0114, true},
		{"eu-west-1", "g4dn.xlarge", 0.587, true},
		// Not in the table: a size the family lacks, an unknown family,
		// a region without prices, a GPU size without a regional price,
		// something that is not a type.
		{"us-east-1", "c5.8xlarge", 0, false},
		{"us-east-1", "t3.metal", 0, false},
		{"us-east-1", "hpc7a.12xlarge", 0, false},
		{"ap-south-2", "c7i.large", 0, false},
		{"eu-west-1", "g4dn.2xlarge", 0, false},
		{"us-east-1", "c7i", 0, false},
		{"us-east-1", "", 0, false},
	} {
		got, ok := OnDemandPrice(tc.region, tc.typ)
		if ok != tc.ok || got != tc.want {
			t.Errorf("OnDemandPrice(%q, %q) = %v, %v; want %v, %v", tc.region, tc.typ, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPriceTableSizesExist: every size the table lists has a
// normalization factor (a size missing there would price at 0).
func TestPriceTableSizesExist(t *testing.T) {
	t.Parallel()
	for name, f := range families {
		for _, s := range f.sizes {
			if normalization[s] == 0 {
				t.Errorf("family %s: size %s has no normalization factor", name, s)
			}
			for r := range f.large {
				if p, ok := OnDemandPrice(r, name+"."+s); !ok || p <= 0 {
					t.Errorf("%s.%s in %s: price %v, %v", name, s, r, p, ok)
				}
			}
		}
	}
}

// TestPricesOnDemand: without spot, prices come from the table, or from
// the prices argument, and a type in neither has none. No call to EC2 is
// made (the endpoint does not answer).
func TestPricesOnDemand(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	s, err := New(context.Background(), Config{Endpoint: "http://127.0.0.1:1", Region: "us-east-1", AMI: "ami-12345678",
		InstanceTypes: []string{"c7i.large", "m5.xlarge", "hpc7a.12xlarge", "x9.large"},
		Prices:        map[string]float64{"m5.xlarge": 0.15, "x9.large": 1.25}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Prices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []glidein.Price{
		{Offer: "c7i.large", USDPerHour: 0.08925, Known: true, Source: SourceTable},
		{Offer: "m5.xlarge", USDPerHour: 0.15, Known: true, Source: SourceOverride},
		{Offer: "hpc7a.12xlarge"},
		{Offer: "x9.large", USDPerHour: 1.25, Known: true, Source: SourceOverride},
	}
	if len(got) != len(want) {
		t.Fatalf("Prices = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("price %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestSpotPricesFromMoto: with spot, the price is the spot price history's
// (moto answers 0.00001 for every type it offers in the region's zones);
// a type moto does not offer there (p3.2xlarge, hpc7a.12xlarge in
// us-east-1) gets an empty answer, and its on-demand price (the table's,
// or the prices argument's) stands in, with a note that says so. A type
// with neither has no price and a note.
func TestSpotPricesFromMoto(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	var calls int
	proxy := recordingProxy(t, endpoint, func(form map[string]string) {
		if form["Action"] == "DescribeSpotPriceHistory" {
			calls++
		}
	})
	s := newSite(t, proxy, "t3.micro", "p3.2xlarge", "hpc7a.12xlarge", "dl2q.24xlarge")
	s.cfg.Spot = true
	s.cfg.Prices = map[string]float64{"hpc7a.12xlarge": 1.44}
	ctx := context.Background()
	got, err := s.Prices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("Prices = %+v", got)
	}
	if p := got[0]; !p.Known || !p.Spot || p.USDPerHour != 0.00001 || p.Source != SourceSpot || p.Note != "" {
		t.Errorf("t3.micro: %+v, want moto's spot price 0.00001", p)
	}
	if p := got[1]; !p.Known || p.Spot || p.USDPerHour != 3.06 || p.Source != SourceTable ||
		!strings.Contains(p.Note, "no price of p3.2xlarge") || !strings.Contains(p.Note, "on-demand price stands in") {
		t.Errorf("p3.2xlarge: %+v, want the on-demand 3.06 with a note", p)
	}
	if p := got[2]; !p.Known || p.Spot || p.USDPerHour != 1.44 || p.Source != SourceOverride || !strings.Contains(p.Note, "on-demand price stands in") {
		t.Errorf("hpc7a.12xlarge: %+v, want the prices argument's 1.44 with a note", p)
	}
	if p := got[3]; p.Known || !strings.Contains(p.Note, "the on-demand table has none") {
		t.Errorf("dl2q.24xlarge: %+v, want no price and a note", p)
	}
	if _, err := s.Prices(ctx); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("DescribeSpotPriceHistory called %d times for two Prices, want once", calls)
	}
}

// TestSpotPricesUnreadable: when EC2 refuses DescribeSpotPriceHistory
// (no permission), the on-demand price stands in, with the error in the
// note.
func TestSpotPricesUnreadable(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	proxy := faultProxy(t, endpoint, func(form map[string]string) string {
		if form["Action"] == "DescribeSpotPriceHistory" {
			return "UnauthorizedOperation"
		}
		return ""
	})
	s := newSite(t, proxy, "c7i.large")
	s.cfg.Spot = true
	got, err := s.Prices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p := got[0]; !p.Known || p.USDPerHour != 0.08925 || !strings.Contains(p.Note, "UnauthorizedOperation") {
		t.Errorf("c7i.large: %+v, want the on-demand price and a note with the error", p)
	}
}

// TestSpotPriceCache counts the DescribeSpotPriceHistory requests that
// reach moto through a proxy while sites sharing one SpotPrices ask for
// their prices as a factory does, every cycle, on a clock the test moves:
// one request for every site of the same instance types until the TTL
// has passed, one more after it; a site of other types asks for its own;
// concurrent askers wait for one request. A failed refresh keeps the last
// good answer (asking again after the retry delay) until it is twice the
// TTL old; then the on-demand price stands in, with the error in the
// note, until a call after the retry delay succeeds.
func TestSpotPriceCache(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	var (
		mu    sync.Mutex
		calls int
		fail  bool
	)
	proxy := faultProxy(t, endpoint, func(form map[string]string) string {
		if form["Action"] != "DescribeSpotPriceHistory" {
			return ""
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		if fail {
			return "UnauthorizedOperation" // not retried by the SDK: one request a call
		}
		return ""
	})
	const ttl, retry = 10 * time.Minute, time.Minute
	cache := NewSpotPrices(ttl, retry)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cache.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	site := func(types ...string) *Site {
		s := newSite(t, proxy, types...)
		s.cfg.Spot = true
		s.cfg.Endpoint = proxy
		WithSpotPrices(cache)(s)
		return s
	}
	a, b := site("t3.micro", "c7i.large"), site("c7i.large", "t3.micro")
	other := site("t3.small")
	ctx := context.Background()
	price := func(s *Site) glidein.Price {
		t.Helper()
		ps, err := s.Prices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ps[0]
	}
	requests := func() int { mu.Lock(); defer mu.Unlock(); return calls }
	step := func(what string, d time.Duration, wantRequests int, wantSpot bool, note string) {
		t.Helper()
		advance(d)
		var p glidein.Price
		for range 3 { // three cycles
			p = price(a)
			price(b)
		}
		if got := requests(); got != wantRequests {
			t.Errorf("%s: %d DescribeSpotPriceHistory requests, want %d", what, got, wantRequests)
		}
		if p.Spot != wantSpot || !strings.Contains(p.Note, note) {
			t.Errorf("%s: t3.micro %+v, want spot %v and a note with %q", what, p, wantSpot, note)
		}
	}

	// Concurrent first askers: one request.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { price(a) })
	}
	wg.Wait()
	step("two sites of the same types, three cycles", 0, 1, true, "")
	price(other)
	if got := requests(); got != 2 {
		t.Errorf("a site of other types: %d requests in all, want 2", got)
	}
	step("within the TTL", ttl-time.Second, 2, true, "")
	step("past the TTL", 2*time.Second, 3, true, "")
	mu.Lock()
	fail = true
	mu.Unlock()
	step("a failed refresh keeps the last good answer", ttl, 4, true, "")
	step("within the retry delay", retry-time.Second, 4, true, "")
	step("after the retry delay, failing again", 2*time.Second, 5, true, "")
	step("the good answer twice the TTL old", 2*ttl, 6, false, "UnauthorizedOperation")
	step("the failure stands within the retry delay", retry-time.Second, 6, false, "UnauthorizedOperation")
	mu.Lock()
	fail = false
	mu.Unlock()
	step("after the retry delay, a good answer again", 2*time.Second, 7, true, "")
	if got := cache.Calls(); got != 7 {
		t.Errorf("the cache counts %d calls, want 7", got)
	}
}
