package query

import (
	"context"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/classad"

	"github.com/pond-htc/pond/overlay/api"
)

func machine(t *testing.T, src string) func() *classad.Ad {
	t.Helper()
	ad, err := classad.ParseAd(src)
	if err != nil {
		t.Fatal(err)
	}
	return func() *classad.Ad { return ad }
}

func TestEvaluator(t *testing.T) {
	const ad = `[ Name = "n1"; Memory = 4096; Cpus = 4; Arch = "X86_64"; HasMatlab = false; KeyboardIdle = 30; Site = "sea" ]`
	tests := []struct {
		name    string
		ad      string
		q       api.Query
		match   bool
		rank    float64
		attrs   map[string]any
		wantErr string
	}{
		{name: "requirements hold", ad: ad, q: api.Query{Requirements: "Memory >= 1024 && HasMatlab =!= true"}, match: true},
		{name: "requirements fail", ad: ad, q: api.Query{Requirements: "Memory >= 8192"}, match: false},
		{name: "undefined attribute is no match", ad: ad, q: api.Query{Requirements: "TARGET.Gpus > 0"}, match: false},
		{name: "rank", ad: ad, q: api.Query{Requirements: "true", Rank: "Memory + KeyboardIdle * 10"}, match: true, rank: 4396},
		{name: "non-numeric rank is zero", ad: ad, q: api.Query{Rank: `"high"`}, match: true, rank: 0},
		{name: "attributes", ad: ad, q: api.Query{Attrs: []string{"Memory", "Site", "HasMatlab", "Missing"}}, match: true, attrs: map[string]any{"Memory": int64(4096), "Site": "sea", "HasMatlab": false}},
		{name: "machine START refuses", ad: `[ Memory = 4096; START = TARGET.Owner == "alice" ]`, q: api.Query{Requirements: "true"}, match: false},
		{name: "machine Requirements sees the job", ad: `[ Memory = 4096; Requirements = TARGET.Rank =!= undefined ]`, q: api.Query{Requirements: "true", Rank: "1"}, match: true, rank: 1},
		{name: "bad requirements", ad: ad, q: api.Query{Requirements: "Memory >="}, wantErr: "requirements"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEvaluator(machine(t, tt.ad))
			res, ok, err := e.Match(context.Background(), &tt.q)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.match {
				t.Fatalf("match = %v, want %v", ok, tt.match)
			}
			if ok && res.Rank != tt.rank {
				t.Fatalf("rank = %v, want %v", res.Rank, tt.rank)
			}
			for k, want := range tt.attrs {
				if res.Attrs[k] != want {
					t.Fatalf("attr %s = %#v, want %#v", k, res.Attrs[k], want)
				}
			}
			if _, ok := res.Attrs["Missing"]; ok {
				t.Fatal("an undefined attribute was reported")
			}
		})
	}
}

func TestEvaluatorCacheBounded(t *testing.T) {
	e := NewEvaluator(machine(t, `[ Memory = 1 ]`))
	for i := range 3 * cacheSize {
		q := api.Query{Requirements: "Memory >= " + strings.Repeat(" ", i%5) + "1", Rank: string(rune('a'+i%26)) + "x"}
		if _, _, err := e.Match(context.Background(), &q); err != nil {
			t.Fatal(err)
		}
	}
	if len(e.cache) > cacheSize || len(e.order) > cacheSize {
		t.Fatalf("cache holds %d entries, bound %d", len(e.cache), cacheSize)
	}
}
