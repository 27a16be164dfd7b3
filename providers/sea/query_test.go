package sea

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
)

// querySea is the sea the data source and pond tests share: a central
// manager of its own pool (no startd, no Score), four free nodes ranked by
// Score, a free node that declines every invitation (its join policy) and
// ranks above them, and a node of a declared pool that ranks above all.
func querySea(t *testing.T) *testSea {
	free := "POND_ORPHAN_TIMEOUT = 1s\n"
	return startSea(t,
		node{name: "cm", role: "cm", pool: "manager", config: "DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR SCHEDD\n"},
		node{name: "n1", score: 1, config: free},
		node{name: "n2", score: 2, config: free},
		node{name: "n3", score: 3, config: free},
		node{name: "n4", score: 4, config: free},
		node{name: "picky", score: 9, config: free + "POND_JOIN_POLICY = false\n"},
		node{name: "campus", pool: "campus", score: 10})
}

// readQuery reads a sea_query named data.sea_query.q with attrs.
func readQuery(t *testing.T, p providers.Provider, attrs map[string]cty.Value) providers.ReadDataResponse {
	t.Helper()
	return p.ReadDataSource(t.Context(), providers.ReadDataRequest{TypeName: "sea_query", Address: "data.sea_query.q", Config: object(t, querySchema, attrs)})
}

// TestSeaQuery reads the sea_query data source over a sea of in-process
// agents: which matches it returns and in what order (rank, k, first-fit),
// the attributes it reports, where it is rooted, its statistics, and its
// errors.
func TestSeaQuery(t *testing.T) {
	s := querySea(t)
	p := configured(t, s.api("cm"))
	all := len(s.agents)
	scored := []string{"campus", "picky", "n4", "n3", "n2", "n1"}
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		// want are the matches, best first; wantAny, for first-fit, how
		// many of scored.
		want    []string
		wantAny int
		ranks   []float64
		// attributes are those reported for the first match.
		attributes map[string]string
	}{
		{name: "best rank", attrs: map[string]cty.Value{"requirements": cty.StringVal("Score >= 2"), "rank": cty.StringVal("Score"), "k": cty.NumberIntVal(3)},
			want: []string{"campus", "picky", "n4"}, ranks: []float64{10, 9, 4}, attributes: map[string]string{}},
		{name: "TARGET scope", attrs: map[string]cty.Value{"requirements": cty.StringVal("TARGET.Score > 1 && TARGET.Score < 4"), "rank": cty.StringVal("-TARGET.Score")},
			want: []string{"n2", "n3"}, ranks: []float64{-2, -3}},
		{name: "k 0 returns every match", attrs: map[string]cty.Value{"requirements": cty.StringVal("Score =!= undefined"), "rank": cty.StringVal("Score"), "k": cty.NumberIntVal(0)},
			want: scored, ranks: []float64{10, 9, 4, 3, 2, 1}},
		{name: "k defaults to 10", attrs: map[string]cty.Value{"requirements": cty.StringVal("true")},
			want: []string{"campus", "cm", "n1", "n2", "n3", "n4", "picky"}},
		{name: "no rank: by name", attrs: map[string]cty.Value{"requirements": cty.StringVal("Score < 3")},
			want: []string{"n1", "n2"}, ranks: []float64{0, 0}},
		{name: "no match", attrs: map[string]cty.Value{"requirements": cty.StringVal("Score > 100")}, want: []string{}},
		// First-fit stops asking once it has k matches: the answer need
		// not cover the sea, and nothing is missing from it.
		{name: "first-fit", attrs: map[string]cty.Value{"requirements": cty.StringVal("Score > 0"), "mode": cty.StringVal("first-fit"), "k": cty.NumberIntVal(2)},
			wantAny: 2},
		{name: "first-fit short of k", attrs: map[string]cty.Value{"requirements": cty.StringVal("Score >= 4"), "rank": cty.StringVal("Score"), "mode": cty.StringVal("first-fit"), "k": cty.NumberIntVal(5)},
			want: []string{"campus", "picky", "n4"}},
		{name: "redundant", attrs: map[string]cty.Value{"requirements": cty.StringVal("Score == 3"), "redundant": cty.True},
			want: []string{"n3"}},
		{name: "attrs", attrs: map[string]cty.Value{"requirements": cty.StringVal("Score == 9"),
			"attrs": cty.ListVal([]cty.Value{cty.StringVal("Score"), cty.StringVal("PondPool"), cty.StringVal("Name"), cty.StringVal("NoSuchAttr")})},
			want: []string{"picky"}, attributes: map[string]string{"Score": "9", "PondPool": "", "Name": "picky"}},
		{name: "attrs of a pool node", attrs: map[string]cty.Value{"requirements": cty.StringVal("Score == 10"),
			"attrs": cty.ListVal([]cty.Value{cty.StringVal("PondPool"), cty.StringVal(APIAttr)})},
			want: []string{"campus"}, attributes: map[string]string{"PondPool": "campus", APIAttr: s.api("campus")}},
		{name: "rooted elsewhere", attrs: map[string]cty.Value{"requirements": cty.StringVal("Score >= 3"), "rank": cty.StringVal("Score"), "sea": cty.StringVal(s.api("n1")), "timeout": cty.StringVal("3s")},
			want: []string{"campus", "picky", "n4", "n3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := readQuery(t, p, tc.attrs)
			if err := providers.Err(resp.Diagnostics); err != nil {
				t.Fatal(err)
			}
			if len(resp.Diagnostics) != 0 {
				t.Errorf("diagnostics: %v", resp.Diagnostics)
			}
			v := resp.Value
			// The configuration comes back as written.
			for name, want := range tc.attrs {
				if got := v.GetAttr(name); !got.RawEquals(object(t, querySchema, tc.attrs).GetAttr(name)) {
					t.Errorf("%s = %#v, want %#v as configured", name, got, want)
				}
			}
			ms := v.GetAttr("matches")
			got := names(ms)
			switch {
			case tc.wantAny > 0:
				if len(got) != tc.wantAny {
					t.Errorf("matches %v, want %d", got, tc.wantAny)
				}
				for _, n := range got {
					if !slices.Contains(scored, n) {
						t.Errorf("%s matched, but has no Score", n)
					}
				}
			case strings.Join(got, " ") != strings.Join(tc.want, " "):
				t.Errorf("matches %v, want %v", got, tc.want)
			}
			for i, m := range ms.AsValueSlice() {
				name := m.GetAttr("name").AsString()
				if addr := m.GetAttr("address").AsString(); addr != s.api(name) {
					t.Errorf("%s: address %s, want its API address %s", name, addr, s.api(name))
				}
				if tc.ranks != nil {
					if r, _ := m.GetAttr("rank").AsBigFloat().Float64(); r != tc.ranks[i] {
						t.Errorf("%s: rank %v, want %v", name, r, tc.ranks[i])
					}
				}
				if i == 0 && tc.attributes != nil {
					got := map[string]string{}
					for k, e := range m.GetAttr("attributes").AsValueMap() {
						got[k] = e.AsString()
					}
					if !mapsEqual(got, tc.attributes) {
						t.Errorf("%s: attributes %v, want %v", name, got, tc.attributes)
					}
				}
			}
			if tc.wantAny > 0 {
				return
			}
			if !v.GetAttr("complete").True() || !v.GetAttr("completeness").RawEquals(cty.NumberFloatVal(1)) {
				t.Errorf("complete %#v, completeness %#v, want a complete answer", v.GetAttr("complete"), v.GetAttr("completeness"))
			}
			if n := v.GetAttr("missing").LengthInt(); n != 0 {
				t.Errorf("missing %v", strs(v.GetAttr("missing")))
			}
			visited, _ := v.GetAttr("visited").AsBigFloat().Int64()
			if visited < int64(all) {
				t.Errorf("visited %d, want every one of the %d nodes", visited, all)
			}
			if msgs, _ := v.GetAttr("messages").AsBigFloat().Int64(); msgs <= 0 {
				t.Errorf("messages %d", msgs)
			}
			if depth, _ := v.GetAttr("depth").AsBigFloat().Int64(); depth <= 0 {
				t.Errorf("depth %d", depth)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		gone := "127.0.0.1:1"
		unconfigured := configured(t, "")
		for _, tc := range []struct {
			name  string
			p     providers.Provider
			typ   string
			attrs map[string]cty.Value
			err   string
		}{
			{name: "no sea", p: unconfigured, attrs: map[string]cty.Value{"requirements": cty.StringVal("true")}, err: "no sea to query"},
			{name: "a sea that does not answer", p: p, attrs: map[string]cty.Value{"requirements": cty.StringVal("true"), "sea": cty.StringVal(gone)}, err: "connection refused"},
			{name: "bad requirements", p: unconfigured, attrs: map[string]cty.Value{"requirements": cty.StringVal("Score >")}, err: "requirements: "},
			{name: "bad rank", p: p, attrs: map[string]cty.Value{"requirements": cty.StringVal("true"), "rank": cty.StringVal("Score +")}, err: "rank: "},
			{name: "bad mode", p: p, attrs: map[string]cty.Value{"requirements": cty.StringVal("true"), "mode": cty.StringVal("all")}, err: `mode: query mode "all"`},
			{name: "bad timeout", p: p, attrs: map[string]cty.Value{"requirements": cty.StringVal("true"), "timeout": cty.StringVal("0s")}, err: `timeout: "0s" is not a positive duration`},
			{name: "unknown data source", p: p, typ: "sea_members", attrs: map[string]cty.Value{"requirements": cty.StringVal("true")}, err: `unknown data source "sea_members"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				typ := tc.typ
				if typ == "" {
					typ = "sea_query"
				}
				resp := tc.p.ReadDataSource(t.Context(), providers.ReadDataRequest{TypeName: typ, Address: "data.sea_query.q", Config: object(t, querySchema, tc.attrs)})
				if err := providers.Err(resp.Diagnostics); err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", err, tc.err)
				}
			})
		}
	})

	// A node whose tree transport does not answer: the answer speaks for
	// the rest of the sea, says so, and names the node; the read warns.
	t.Run("incomplete", func(t *testing.T) {
		breakTree(t, s, "n2")
		resp := readQuery(t, p, map[string]cty.Value{"requirements": cty.StringVal("Score > 0"), "rank": cty.StringVal("Score"), "k": cty.NumberIntVal(0), "timeout": cty.StringVal("2s")})
		if err := providers.Err(resp.Diagnostics); err != nil {
			t.Fatal(err)
		}
		v := resp.Value
		if got := names(v.GetAttr("matches")); slices.Contains(got, "n2") || len(got) != 5 {
			t.Errorf("matches %v, want the five scored nodes that answered", got)
		}
		if v.GetAttr("complete").True() {
			t.Error("complete is true")
		}
		if c, _ := v.GetAttr("completeness").AsBigFloat().Float64(); c >= 1 || c <= 0 {
			t.Errorf("completeness %v", c)
		}
		if got := strs(v.GetAttr("missing")); !slices.Contains(got, "n2") {
			t.Errorf("missing %v, want n2 among them", got)
		}
		w := warnings(resp.Diagnostics)
		if len(w) != 1 || w[0] != "Matches of data.sea_query.q may be missing" {
			t.Fatalf("warnings %v", w)
		}
	})
}

// breakTree points the tree address agent name advertises at a port where
// nothing listens, so that tree queries cannot reach it, until the test
// ends; it waits until queries rooted at the central manager cm miss it.
func breakTree(t *testing.T, s *testSea, name string) {
	t.Helper()
	c := s.client(name)
	real := s.self(name).Tags[api.TagTree]
	if _, err := c.SetTags(t.Context(), map[string]string{api.TagTree: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := c.SetTags(context.Background(), map[string]string{api.TagTree: real}); err != nil {
			t.Error(err)
		}
		s.waitConverged()
	})
	eventually(t, 10*time.Second, "the broken tree address to spread", func() error {
		for other := range s.stops {
			for _, m := range s.agents[other].Sea().Members() {
				if m.Name == name && m.Tags[api.TagTree] != "127.0.0.1:1" {
					return fmt.Errorf("%s still sees %s's tree at %s", other, name, m.Tags[api.TagTree])
				}
			}
		}
		return nil
	})
	eventually(t, 10*time.Second, "queries to miss "+name, func() error {
		ans, err := s.client("cm").Query(t.Context(), api.Query{Requirements: "true", Deadline: time.Now().Add(2 * time.Second)})
		if err != nil {
			return err
		}
		if !slices.Contains(ans.Stats.MissingMembers, name) {
			return fmt.Errorf("a query at cm misses %v", ans.Stats.MissingMembers)
		}
		return nil
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
