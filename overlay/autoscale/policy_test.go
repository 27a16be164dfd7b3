package autoscale

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/member"
	"github.com/pond-htc/pond/overlay/query"
)

// seaNode is a node of a test sea: a real membership manager behind a real
// HTTP server, and a machine ad that shows its membership as the agent's
// does.
type seaNode struct {
	name string
	api  string
	mgr  *member.Manager
	base *classad.Ad

	mu      sync.Mutex
	stamped *api.Membership // what SetMembership was told last
}

// seaNode is a member.Node.
func (n *seaNode) Busy() string                    { return "" }
func (n *seaNode) CentralManagerAlive(string) bool { return true }
func (n *seaNode) MachineAd() *classad.Ad          { return n.ad() }
func (n *seaNode) Drain(context.Context, bool) (api.DrainResult, func()) {
	return api.DrainResult{}, func() {}
}

func (n *seaNode) SetMembership(_ context.Context, m *api.Membership) error {
	n.mu.Lock()
	n.stamped = m
	n.mu.Unlock()
	return nil
}

func (n *seaNode) ad() *classad.Ad {
	ad := n.base.Copy()
	ad.SetString("Name", n.name)
	ad.SetString(APIAttr, n.api)
	ad.SetString("PondPool", "")
	n.mu.Lock()
	cur := n.stamped
	n.mu.Unlock()
	if cur != nil {
		ad.SetString("PondName", cur.Pond)
		ad.SetString("PondID", cur.PondID)
	}
	return ad
}

// testSea runs tree queries by evaluating them on every node's ad, as each
// node's evaluator does in the real tree.
type testSea struct {
	nodes   []*seaNode
	mu      sync.Mutex
	queries []api.Query
}

func newSea(t *testing.T, machines map[string]string, joinPolicy map[string]string) *testSea {
	t.Helper()
	s := &testSea{}
	names := make([]string, 0, len(machines))
	for n := range machines {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		n := &seaNode{name: name, base: jobAd(t, "Requirements = true\n"+machines[name])}
		mgr, err := member.New(n, member.Options{
			Name:       name,
			JoinPolicy: joinPolicy[name],
		})
		if err != nil {
			t.Fatal(err)
		}
		n.mgr = mgr
		srv := httptest.NewServer(mgr.Handler())
		t.Cleanup(srv.Close)
		n.api = srv.Listener.Addr().String()
		s.nodes = append(s.nodes, n)
	}
	return s
}

func (s *testSea) Query(ctx context.Context, q api.Query) (*api.Answer, error) {
	s.mu.Lock()
	s.queries = append(s.queries, q)
	s.mu.Unlock()
	var out []api.Match
	for _, n := range s.nodes {
		res, ok, err := query.NewEvaluator(n.ad).Match(ctx, &q)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, api.Match{Name: n.name, Rank: res.Rank, Attrs: map[string]any{APIAttr: n.api}})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Rank != out[j].Rank {
			return out[i].Rank > out[j].Rank
		}
		return out[i].Name < out[j].Name
	})
	if q.K > 0 && len(out) > q.K {
		out = out[:q.K]
	}
	return &api.Answer{Query: q, Matches: out}, nil
}

func (s *testSea) queryCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queries)
}

// ponds says which pond each node belongs to ("" when free).
func (s *testSea) ponds() map[string]string {
	out := map[string]string{}
	for _, n := range s.nodes {
		out[n.name] = ""
		if cur := n.mgr.Current(); cur != nil {
			out[n.name] = cur.Pond
		}
	}
	return out
}

// memPool is a queue and a collector held in memory.
type memPool struct {
	mu          sync.Mutex
	jobs        []Job
	slots       []*classad.Ad
	reschedules int
}

func (p *memPool) Jobs(context.Context) ([]Job, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.jobs), nil
}

func (p *memPool) Slots(context.Context) ([]*classad.Ad, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.slots), nil
}

func (p *memPool) Reschedule(context.Context) error {
	p.mu.Lock()
	p.reschedules++
	p.mu.Unlock()
	return nil
}

func (p *memPool) set(jobs []Job) {
	p.mu.Lock()
	p.jobs = jobs
	p.mu.Unlock()
}

func jobs(t *testing.T, cluster, n int, src string, running bool, host string) []Job {
	out := make([]Job, n)
	for i := range out {
		out[i] = Job{ID: fmt.Sprintf("%d.%d", cluster, i), Ad: jobAd(t, src), Running: running, Host: host}
	}
	return out
}

type harness struct {
	sea    *testSea
	pool   *memPool
	policy *Policy
	now    time.Time
	fast   []bool
	mu     sync.Mutex
}

// harness is the policy's autoscale.Node.
func (h *harness) CondorHost() string { return "127.0.0.1:9" }

func (h *harness) Query(ctx context.Context, q api.Query) (*api.Answer, error) {
	return h.sea.Query(ctx, q)
}

func (h *harness) FastNegotiation(_ context.Context, on bool) error {
	h.mu.Lock()
	h.fast = append(h.fast, on)
	h.mu.Unlock()
	return nil
}

func newHarness(t *testing.T, sea *testSea, cfg Config, dir string) *harness {
	t.Helper()
	h := &harness{sea: sea, pool: &memPool{}, now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	h.policy = h.open(t, cfg, dir)
	return h
}

func (h *harness) open(t *testing.T, cfg Config, dir string) *Policy {
	t.Helper()
	p, err := New(h, h.pool, Options{
		Name:    "submit",
		API:     "127.0.0.1:1",
		DataDir: dir,
		Config:  cfg,
		Now: func() time.Time {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.now
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	h.now = h.now.Add(d)
	h.mu.Unlock()
}

func (h *harness) step(t *testing.T) {
	t.Helper()
	if err := h.policy.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func testConfig(members, ponds int) Config {
	c := DefaultConfig()
	c.MaxMembers, c.MaxPonds = members, ponds
	c.QueryInterval, c.Grace = 10*time.Second, 30*time.Second
	return c
}

var memories = map[string]string{
	"n1k":  "Memory = 1024\nSite = \"sea\"\n",
	"n2k":  "Memory = 2048\nSite = \"sea\"\n",
	"n4k":  "Memory = 4096\nSite = \"sea\"\n",
	"n8k":  "Memory = 8192\nSite = \"sea\"\n",
	"n16k": "Memory = 16384\nSite = \"sea\"\n",
	"gpu":  "Memory = 1024\nSite = \"sea\"\nHasGPU = true\n",
}

func members(p Pond) []string {
	var out []string
	for _, m := range p.Members {
		out = append(out, m.Name)
	}
	sort.Strings(out)
	return out
}

func TestGrowBestRankUpToTheLimit(t *testing.T) {
	tests := []struct {
		name       string
		maxMembers int
		idle       int
		joinPolicy map[string]string
		want       []string
	}{
		{name: "capped by max members", maxMembers: 3, idle: 10, want: []string{"n16k", "n4k", "n8k"}},
		{name: "capped by the group's jobs", maxMembers: 8, idle: 2, want: []string{"n16k", "n8k"}},
		{name: "capped by the matching sea", maxMembers: 8, idle: 10, want: []string{"n16k", "n2k", "n4k", "n8k"}},
		{name: "a decline is replaced by the next candidate", maxMembers: 2, idle: 10,
			joinPolicy: map[string]string{"n16k": "false"}, want: []string{"n4k", "n8k"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newSea(t, memories, tt.joinPolicy), testConfig(tt.maxMembers, 2), "")
			h.pool.set(jobs(t, 1, tt.idle, bigJob, false, ""))
			h.step(t)
			ponds := h.policy.Ponds()
			if len(ponds) != 1 {
				t.Fatalf("%d ponds, want 1", len(ponds))
			}
			if got := members(ponds[0]); !slices.Equal(got, tt.want) {
				t.Fatalf("members %v, want %v", got, tt.want)
			}
			for node, pond := range h.sea.ponds() {
				if want := slices.Contains(tt.want, node); want != (pond == ponds[0].Name) {
					t.Errorf("%s is in pond %q", node, pond)
				}
			}
			// Members carry the initiating jobs.
			for _, n := range h.sea.nodes {
				if cur := n.mgr.Current(); cur != nil && (len(cur.JobIDs) != min(tt.idle, maxJobIDs) || cur.JobIDs[0] != "1.0") {
					t.Errorf("%s stamped with jobs %v", n.name, cur.JobIDs)
				}
			}
			if !slices.Equal(h.fast, []bool{true}) || h.pool.reschedules == 0 {
				t.Fatalf("fast = %v, reschedules = %d: the negotiator was not hurried", h.fast, h.pool.reschedules)
			}
		})
	}
}

func TestNoPondWhenThePoolCanRunTheJobs(t *testing.T) {
	h := newHarness(t, newSea(t, memories, nil), testConfig(4, 2), "")
	h.pool.slots = []*classad.Ad{jobAd(t, "Requirements = true\nMemory = 4096\nSite = \"sea\"\nName = \"slot1@local\"\n")}
	h.pool.set(jobs(t, 1, 5, bigJob, false, ""))
	h.step(t)
	if n := h.sea.queryCount(); n != 0 || len(h.policy.Ponds()) != 0 {
		t.Fatalf("%d queries, %d ponds: want none while a slot of the pool matches", n, len(h.policy.Ponds()))
	}
	// The slot goes away: the group is now unserved.
	h.pool.slots = nil
	h.step(t)
	if len(h.policy.Ponds()) != 1 {
		t.Fatal("no pond once no slot matched")
	}
}

func TestLimits(t *testing.T) {
	twoGroups := append(jobs(t, 1, 3, bigJob, false, ""), jobs(t, 2, 2, otherReq, false, "")...)
	t.Run("max ponds", func(t *testing.T) {
		h := newHarness(t, newSea(t, memories, nil), testConfig(8, 1), "")
		h.pool.set(twoGroups)
		h.step(t)
		h.advance(time.Minute)
		h.step(t)
		if ps := h.policy.Ponds(); len(ps) != 1 || len(ps[0].Members) != 3 {
			t.Fatalf("ponds %+v, want one of 3 members", ps)
		}
		if h.sea.ponds()["gpu"] != "" {
			t.Fatal("the second group got a member beyond max_ponds")
		}
	})
	t.Run("query rate", func(t *testing.T) {
		h := newHarness(t, newSea(t, memories, nil), testConfig(8, 2), "")
		h.pool.set(twoGroups)
		h.step(t)
		h.advance(5 * time.Second)
		h.step(t)
		if n := h.sea.queryCount(); n != 1 {
			t.Fatalf("%d queries within the query interval, want 1", n)
		}
		h.advance(5 * time.Second)
		h.step(t)
		if n := h.sea.queryCount(); n != 2 {
			t.Fatalf("%d queries after the query interval, want 2", n)
		}
		ps := h.policy.Ponds()
		if len(ps) != 2 || !slices.Equal(members(ps[1]), []string{"gpu"}) {
			t.Fatalf("ponds %+v, want a second pond holding gpu", ps)
		}
		if ps[0].ID == ps[1].ID || ps[0].Name == ps[1].Name {
			t.Fatal("two groups share one pond identity")
		}
	})
	t.Run("a pond short of its demand grows later", func(t *testing.T) {
		sea := newSea(t, memories, map[string]string{"n16k": "false"})
		h := newHarness(t, sea, testConfig(8, 2), "")
		h.pool.set(jobs(t, 1, 10, bigJob, false, ""))
		h.step(t)
		if got := members(h.policy.Ponds()[0]); len(got) != 3 {
			t.Fatalf("members %v, want the 3 that accept", got)
		}
		// A node that declined changes its mind (here: a new node in
		// its place accepts); the next query adds it.
		sea.nodes = append(sea.nodes, newSea(t, map[string]string{"n32k": "Memory = 32768\nSite = \"sea\"\n"}, nil).nodes...)
		h.advance(10 * time.Second)
		h.step(t)
		if got := members(h.policy.Ponds()[0]); len(got) != 4 || !slices.Contains(got, "n32k") {
			t.Fatalf("members %v, want n32k added", got)
		}
	})
}

func TestReleaseAfterGrace(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, newSea(t, memories, nil), testConfig(2, 2), dir)
	h.pool.set(jobs(t, 1, 4, bigJob, false, ""))
	h.step(t)
	pond := h.policy.Ponds()[0]
	member := pond.Members[0].Name

	steps := []struct {
		name    string
		jobs    []Job
		advance time.Duration
		reopen  bool
		want    bool // the pond still exists
	}{
		{name: "jobs running", jobs: jobs(t, 1, 2, bigJob, true, "slot1_1@"+member), advance: time.Minute, want: true},
		{name: "drained, within grace", jobs: nil, advance: 20 * time.Second, want: true},
		{name: "another group's job runs on a member", jobs: jobs(t, 7, 1, otherReq, true, "slot1_3@"+member), advance: time.Minute, want: true},
		{name: "a restart keeps the pond", jobs: nil, advance: 20 * time.Second, reopen: true, want: true},
		{name: "within the grace granted by the restart", jobs: nil, advance: 20 * time.Second, want: true},
		{name: "drained past grace", jobs: nil, advance: 10 * time.Second, want: false},
	}
	for _, s := range steps {
		h.pool.set(s.jobs)
		h.advance(s.advance)
		if s.reopen {
			h.policy = h.open(t, testConfig(2, 2), dir)
		}
		h.step(t)
		if got := len(h.policy.Ponds()) == 1; got != s.want {
			t.Fatalf("%s: pond exists = %v, want %v", s.name, got, s.want)
		}
	}
	for node, p := range h.sea.ponds() {
		if p != "" {
			t.Fatalf("%s still in pond %s after release", node, p)
		}
	}
	if last := h.fast[len(h.fast)-1]; last {
		t.Fatal("the negotiator's minimum interval was not restored")
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := New(nil, nil, Options{}); err == nil {
		t.Fatal("no error without Pool and Query")
	}
	sea := newSea(t, nil, nil)
	_, err := New(&harness{sea: sea}, &memPool{}, Options{Config: Config{MaxMembers: 0, MaxPonds: 1}})
	if err == nil {
		t.Fatal("no error with MaxMembers 0")
	}
}
