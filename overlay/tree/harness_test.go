package tree

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/ring"
)

// adEvaluator matches queries of the form "Attr op Number [&& ...]" against
// a map ad; Rank names one attribute (or is empty for 0).
type adEvaluator struct{ ad map[string]float64 }

func (a adEvaluator) Match(_ context.Context, q *api.Query) (Result, bool, error) {
	ok, err := evalReq(a.ad, q.Requirements)
	if err != nil || !ok {
		return Result{}, false, err
	}
	res := Result{Rank: a.ad[q.Rank], Attrs: map[string]any{}}
	for _, n := range q.Attrs {
		if v, ok := a.ad[n]; ok {
			res.Attrs[n] = v
		}
	}
	return res, true, nil
}

func evalReq(ad map[string]float64, req string) (bool, error) {
	if strings.TrimSpace(req) == "" {
		return true, nil
	}
	for _, term := range strings.Split(req, "&&") {
		f := strings.Fields(term)
		if len(f) != 3 {
			return false, fmt.Errorf("requirement %q: want Attr op Number", term)
		}
		n, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return false, fmt.Errorf("requirement %q: %w", term, err)
		}
		v := ad[f[0]]
		var ok bool
		switch f[1] {
		case ">=":
			ok = v >= n
		case "<":
			ok = v < n
		case "==":
			ok = v == n
		default:
			return false, fmt.Errorf("requirement %q: unknown operator %q", term, f[1])
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

func randomAd(r *rand.Rand) map[string]float64 {
	return map[string]float64{
		"Memory":       float64(1024 * (1 + r.IntN(64))),
		"Cpus":         float64(1 + r.IntN(32)),
		"KeyboardIdle": float64(r.IntN(100000)),
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%03d", i) }

// bruteForce returns the expected answer over the ads of live nodes.
func bruteForce(ads map[string]map[string]float64, q api.Query) []api.Match {
	var ms []api.Match
	for name, ad := range ads {
		res, ok, _ := adEvaluator{ad}.Match(context.Background(), &q)
		if ok {
			ms = append(ms, api.Match{Name: name, Rank: res.Rank})
		}
	}
	return TopK(ms, q.K)
}

func names(ms []api.Match) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// checkAnswer verifies a fault-free answer against brute force.
func checkAnswer(t *testing.T, ads map[string]map[string]float64, q api.Query, a *api.Answer) {
	t.Helper()
	want := bruteForce(ads, q)
	// First-fit stops early and may leave regions unasked.
	if q.Mode == api.BestRank && (a.Stats.Completeness != 1 || len(a.Stats.Missing) != 0) {
		t.Errorf("completeness %v, missing %v (%v)", a.Stats.Completeness, a.Stats.Missing, a.Stats.MissingMembers)
	}
	switch q.Mode {
	case api.BestRank:
		got, exp := names(a.Matches), names(want)
		if strings.Join(got, ",") != strings.Join(exp, ",") {
			t.Errorf("best-rank matches\n got %v\nwant %v", got, exp)
		}
	case api.FirstFit:
		wantN := len(want)
		if q.K > 0 {
			all := bruteForce(ads, api.Query{Requirements: q.Requirements, Rank: q.Rank})
			wantN = min(q.K, len(all))
		}
		if len(a.Matches) != wantN {
			t.Errorf("first-fit returned %d matches, want %d", len(a.Matches), wantN)
		}
		seen := map[string]bool{}
		for _, m := range a.Matches {
			ok, _ := evalReq(ads[m.Name], q.Requirements)
			if !ok || seen[m.Name] {
				t.Errorf("first-fit returned invalid or repeated match %s", m.Name)
			}
			seen[m.Name] = true
		}
	}
}

func members(n int, addr func(i int) string) []ring.Member {
	ms := make([]ring.Member, n)
	for i := range ms {
		ms[i] = ring.NewMember(nodeName(i), addr(i))
	}
	return ms
}
