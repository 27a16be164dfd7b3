package tree

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

// countingEvaluator counts the queries a node evaluated.
type countingEvaluator struct {
	adEvaluator
	n atomic.Int64
}

func (c *countingEvaluator) Match(ctx context.Context, q *api.Query) (Result, bool, error) {
	c.n.Add(1)
	return c.adEvaluator.Match(ctx, q)
}

// seaTLS issues n nodes certificates of a new authority (or of
// foreign's, for the nodes foreign names) and returns their transports'
// configurations.
func seaTLS(t testing.TB, n int, foreign map[int]bool) func(i int) TCPConfig {
	t.Helper()
	open := func() *auth.Authority {
		a, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "auth"))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	sea, other := open(), open()
	cfgs := make([]TCPConfig, n)
	for i := range n {
		a := sea
		if foreign[i] {
			a = other
		}
		dir := filepath.Join(t.TempDir(), nodeName(i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		cert, key, ca, err := a.WriteCertificate(dir, nodeName(i), []string{"127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := auth.ServerTLS(cert, key, ca)
		if err != nil {
			t.Fatal(err)
		}
		cli, err := auth.ClientTLS(ca, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = TCPConfig{ServerTLS: srv, ClientTLS: cli}
	}
	return func(i int) TCPConfig { return cfgs[i] }
}

func evaluations(s *tcpSea, i int) int64 {
	return s.engines[i].cfg.Evaluator.(*countingEvaluator).n.Load()
}

// TestTCPMutualTLS runs tree queries over mutual TLS: with every node of
// the sea the answers are those of plain TCP. One intruder, whose
// certificate another CA signed, is in every node's view: a query from
// the sea completes without it (its region is handed on, it is never
// asked), and its own query learns nothing of the sea (no node evaluates
// it).
func TestTCPMutualTLS(t *testing.T) {
	const n, intruder = 24, 7
	t.Run("sea", func(t *testing.T) {
		s := newTCPSeaWith(t, n, 5, seaTLS(t, n, nil))
		q := api.Query{K: 10, Rank: "Memory", Requirements: "Cpus >= 4", Deadline: time.Now().Add(5 * time.Second)}
		a, err := s.engines[3].Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		checkAnswer(t, s.ads, q, a)
		if a.Stats.Completeness != 1 {
			t.Errorf("completeness %v over TLS", a.Stats.Completeness)
		}
	})
	t.Run("intruder", func(t *testing.T) {
		s := newTCPSeaWith(t, n, 5, seaTLS(t, n, map[int]bool{intruder: true}))
		q := api.Query{Rank: "Memory", Deadline: time.Now().Add(3 * time.Second)}
		a, err := s.engines[3].Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, m := range a.Matches {
			found = append(found, m.Name)
		}
		if slices.Contains(found, nodeName(intruder)) {
			t.Errorf("the intruder answered: %v", found)
		}
		for i := range n {
			if i != intruder && !slices.Contains(found, nodeName(i)) {
				t.Errorf("%s, of the sea, is missing from the answer %v (stats %+v)", nodeName(i), found, a.Stats)
			}
		}
		if got := evaluations(s, intruder); got != 0 {
			t.Errorf("the intruder evaluated %d queries of the sea", got)
		}
		if a.Stats.Covered != n-1 || !slices.Equal(a.Stats.MissingMembers, []string{nodeName(intruder)}) {
			t.Errorf("covered %d, missing %v; want %d and only the intruder", a.Stats.Covered, a.Stats.MissingMembers, n-1)
		}

		// The intruder's own query.
		before := make([]int64, n)
		for i := range n {
			before[i] = evaluations(s, i)
		}
		q.Deadline = time.Now().Add(2 * time.Second)
		a, err = s.engines[intruder].Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Matches) != 1 || a.Matches[0].Name != nodeName(intruder) {
			t.Errorf("the intruder's query found %d matches: %+v", len(a.Matches), a.Matches)
		}
		for i := range n {
			if i != intruder && evaluations(s, i) != before[i] {
				t.Errorf("%s evaluated the intruder's query", nodeName(i))
			}
		}
	})
}
