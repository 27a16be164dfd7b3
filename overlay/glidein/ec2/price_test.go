package ec2

import (
	"context"
	"strings"
	"testing"

	"github.com/pond-htc/pond/overlay/glidein"
)

func TestOnDemandPrice(t *testing.T) {
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
