package tree

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/ring"
)

type localSea struct {
	net     *LocalNetwork
	engines []*Engine
	ads     map[string]map[string]float64
}

func newLocalSea(t testing.TB, n int, seed uint64) *localSea {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	s := &localSea{net: NewLocalNetwork(), ads: map[string]map[string]float64{}}
	view := ring.NewView(members(n, func(int) string { return "" }))
	for i := range n {
		name := nodeName(i)
		ad := randomAd(r)
		s.ads[name] = ad
		rt := NewMemberRouter(ring.NewMember(name, ""), ring.TableConfig{})
		rt.SetView(view)
		e, err := NewEngine(Config{Router: rt, Transport: s.net.Transport(name), Evaluator: adEvaluator{ad}})
		if err != nil {
			t.Fatal(err)
		}
		s.net.Register(name, e)
		s.engines = append(s.engines, e)
	}
	return s
}

func TestEngineLocal(t *testing.T) {
	tests := []struct {
		name string
		n    int
		q    api.Query
	}{
		{"single node", 1, api.Query{K: 3, Rank: "Memory"}},
		{"two nodes", 2, api.Query{K: 3, Rank: "Memory"}},
		{"best-rank k=10", 64, api.Query{K: 10, Rank: "Memory", Requirements: "Cpus >= 8"}},
		{"best-rank all", 64, api.Query{K: 0, Rank: "KeyboardIdle"}},
		{"best-rank none match", 64, api.Query{K: 5, Requirements: "Cpus >= 1000"}},
		{"best-rank ties by name", 100, api.Query{K: 20, Rank: "Nothing"}},
		{"best-rank redundant", 100, api.Query{K: 10, Rank: "Memory", Redundant: true}},
		{"first-fit k=5", 100, api.Query{K: 5, Mode: api.FirstFit, Requirements: "Memory >= 32768"}},
		{"first-fit k=1 redundant", 100, api.Query{K: 1, Mode: api.FirstFit, Redundant: true}},
		{"first-fit more than exist", 50, api.Query{K: 40, Mode: api.FirstFit, Requirements: "Cpus >= 30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLocalSea(t, tt.n, 7)
			for _, root := range []int{0, tt.n / 2, tt.n - 1} {
				q := tt.q
				q.Attrs = []string{"Memory"}
				q.Deadline = time.Now().Add(5 * time.Second)
				a, err := s.engines[root].Query(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				checkAnswer(t, s.ads, q, a)
				for _, m := range a.Matches {
					if m.Attrs["Memory"] != s.ads[m.Name]["Memory"] {
						t.Errorf("match %s reports Memory %v, ad has %v", m.Name, m.Attrs["Memory"], s.ads[m.Name]["Memory"])
					}
				}
				if q.Mode == api.BestRank && !q.Redundant && a.Stats.Visited != tt.n {
					t.Errorf("visited %d nodes, want %d", a.Stats.Visited, tt.n)
				}
			}
		})
	}
}

func TestEngineDepthLogarithmic(t *testing.T) {
	s := newLocalSea(t, 200, 3)
	a, err := s.engines[5].Query(context.Background(), api.Query{K: 10, Rank: "Memory", Deadline: time.Now().Add(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	// log2(200) is about 7.6; allow slack for uneven identifier gaps.
	if a.Stats.Depth > 12 || a.Stats.Depth < 4 {
		t.Errorf("depth %d for 200 nodes, want about log2(200)", a.Stats.Depth)
	}
	if want := 2 * (200 - 1); a.Stats.Messages != want {
		t.Errorf("messages %d, want %d (one request and one answer per tree edge)", a.Stats.Messages, want)
	}
}

func TestEngineInvalid(t *testing.T) {
	s := newLocalSea(t, 3, 1)
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		q    api.Query
	}{
		{"no deadline", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, api.Query{}},
		{"bad mode", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Second)
		}, api.Query{Mode: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			if _, err := s.engines[0].Query(ctx, tt.q); err == nil {
				t.Fatal("query succeeded")
			}
		})
	}
	if _, err := NewEngine(Config{}); err == nil {
		t.Fatal("NewEngine accepted an empty config")
	}
}

func TestEngineDeadNodesLocal(t *testing.T) {
	const n = 100
	s := newLocalSea(t, n, 11)
	r := rand.New(rand.NewPCG(9, 9))
	dead := map[string]bool{}
	for len(dead) < 10 {
		i := 1 + r.IntN(n-1)
		dead[nodeName(i)] = true
		s.net.Unregister(nodeName(i))
	}
	live := map[string]map[string]float64{}
	for k, v := range s.ads {
		if !dead[k] {
			live[k] = v
		}
	}
	q := api.Query{K: 0, Rank: "Memory", Deadline: time.Now().Add(2 * time.Second)}
	a, err := s.engines[0].Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, m := range a.Matches {
		got[m.Name] = true
	}
	for name := range live {
		if !got[name] {
			t.Errorf("live node %s missing from answer", name)
		}
	}
	// Dead nodes are reported missing; nothing live is.
	for _, name := range a.Stats.MissingMembers {
		if !dead[name] {
			t.Errorf("live node %s reported missing", name)
		}
	}
	if want := float64(n-len(dead)) / n; a.Stats.Completeness != want {
		t.Errorf("completeness %v, want %v", a.Stats.Completeness, want)
	}
	if a.Stats.Latency > time.Second {
		t.Errorf("failed sends should be retried at once, took %v", a.Stats.Latency)
	}
}

func TestTopK(t *testing.T) {
	ms := []api.Match{{Name: "b", Rank: 1}, {Name: "a", Rank: 1}, {Name: "c", Rank: 5}}
	got := TopK(ms, 2)
	if len(got) != 2 || got[0].Name != "c" || got[1].Name != "a" {
		t.Fatalf("TopK: %v", got)
	}
}
