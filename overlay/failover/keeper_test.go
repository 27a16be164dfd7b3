package failover

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// keeperNode is a Node that records what its Keeper had it do, and
// holds what it was given.
type keeperNode struct {
	k       *Keeper
	members []api.FailoverMember
	fetched *api.FailoverState
	own     map[string]bool // knobs of the node's own configuration

	mu       sync.Mutex
	calls    []string
	host     string
	set      map[string]string
	acc      map[string]float64
	flocks   []api.FlockConfig
	saved    *api.FailoverState
	pushed   map[string]*api.FailoverState
	replConf map[string]string
}

func (n *keeperNode) record(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, fmt.Sprintf(format, args...))
}

func (n *keeperNode) Members() []api.FailoverMember { return n.members }
func (n *keeperNode) ConfirmDelay() time.Duration   { return 0 }
func (n *keeperNode) OwnPoolProven() bool           { return true }
func (n *keeperNode) APIAddr() string               { return "self:1" }
func (n *keeperNode) OwnKnob(name string) bool      { return n.own[name] }
func (n *keeperNode) StopFlock()                    { n.record("stop-flock acting=%d", n.k.Acting()) }
func (n *keeperNode) FlockConfigs() json.RawMessage { return nil }
func (n *keeperNode) Reschedule(context.Context)    {}

func (n *keeperNode) Candidates(context.Context) ([]Candidate, map[string]string) {
	var cs []Candidate
	apis := map[string]string{}
	for _, m := range n.members {
		if m.Alive && m.Name != n.k.cfg.Name {
			cs = append(cs, Candidate{Name: m.Name, RTT: -1})
			apis[m.Name] = m.API
		}
	}
	return cs, apis
}

func (n *keeperNode) SetTags(tags map[string]string) error {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		kv = append(kv, k+"="+tags[k])
	}
	n.record("tags %s", strings.Join(kv, " "))
	return nil
}

func (n *keeperNode) FetchState(_ context.Context, mgr api.FailoverMember) (*api.FailoverState, error) {
	n.record("fetch %s", mgr.Name)
	return n.fetched, nil
}

func (n *keeperNode) PushState(_ context.Context, addr string, st *api.FailoverState) error {
	n.record("push %s", addr)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pushed == nil {
		n.pushed = map[string]*api.FailoverState{}
	}
	n.pushed[addr] = st
	return nil
}

func (n *keeperNode) SaveState(st *api.FailoverState) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.saved = st
	return nil
}

func (n *keeperNode) Reconfigure(host string, set map[string]string) error {
	list := ""
	if l, ok := set["DAEMON_LIST"]; ok {
		list = " list=" + l
	}
	n.record("daemons @%s epoch=%s%s", cmp.Or(host, "self"), set[wire.EpochKnob], list)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.host, n.set = host, set
	return nil
}

func (n *keeperNode) CondorHost() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.host
}

func (n *keeperNode) ReplicatedConfig() map[string]string { return n.replConf }
func (n *keeperNode) Accounting() map[string]float64      { return map[string]float64{"local@p": 1} }

func (n *keeperNode) SetAccounting(acc map[string]float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.acc = acc
}

func (n *keeperNode) RunFlock(cs []api.FlockConfig, replace bool) error {
	n.record("run-flock replace=%v", replace)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.flocks = cs
	return nil
}

// TestKeeperStep drives one node's Keeper through the fail-over's
// decisions, one look at the sea each (Step), and checks what it tells
// the node to do.
func TestKeeperStep(t *testing.T) {
	member := func(name string, epoch int64, alive bool) api.FailoverMember {
		return api.FailoverMember{Name: name, API: name + ":1", Pool: "p", Alive: alive, Epoch: epoch}
	}
	replicaState := &api.FailoverState{Pool: "p", Epoch: 1, Manager: "cm", ManagerAPI: "cm:1", Replicas: []string{"r0", "r1"}}
	for _, tc := range []struct {
		name     string
		cfg      Config
		state    *api.FailoverState
		acting   int64 // the node acts at this epoch before the step
		members  []api.FailoverMember
		start    bool
		fetched  *api.FailoverState // what the acting manager answers, nil when it does not
		follows  string             // the member the node follows before the step, at its epoch
		want     []string
		wantEpch int64
	}{
		{name: "declared manager starts alone", cfg: Config{Name: "cm", Original: true},
			members: []api.FailoverMember{member("cm", 0, true)}, start: true,
			want: []string{"daemons @self epoch=1 list=MGR", "run-flock replace=false", "tags cm=self:1 epoch=1"}, wantEpch: 1},
		{name: "declared manager back while a replica acts, with a hold-down", cfg: Config{Name: "cm", Original: true, HoldDown: time.Minute},
			members: []api.FailoverMember{member("cm", 0, true), member("r0", 5, true)}, start: true,
			want: []string{"stop-flock acting=0", "daemons @r0:1 epoch=5", "tags cm=r0:1"}},
		{name: "declared manager back while a replica acts, no hold-down", cfg: Config{Name: "cm", Original: true},
			members: []api.FailoverMember{member("cm", 0, true), member("r0", 5, true)}, start: true,
			want: []string{"fetch r0", "daemons @self epoch=6 list=MGR", "run-flock replace=false", "tags cm=self:1 epoch=6"}, wantEpch: 6},
		{name: "member follows the acting manager", cfg: Config{Name: "w"},
			members: []api.FailoverMember{member("cm", 2, true), member("w", 0, true)},
			want:    []string{"daemons @cm:1 epoch=2", "tags cm=cm:1"}},
		{name: "first replica takes over from a failed manager", cfg: Config{Name: "r0", Replicas: 2}, state: replicaState,
			members: []api.FailoverMember{member("cm", 1, false), member("r0", 0, true), member("r1", 0, true)},
			want: []string{"daemons @self epoch=2 list=MGR", "run-flock replace=false", "tags cm=self:1 epoch=2",
				"push r1:1"}, wantEpch: 2},
		{name: "second replica waits while the first is alive", cfg: Config{Name: "r1", Step: time.Hour}, state: replicaState,
			members: []api.FailoverMember{member("cm", 1, false), member("r0", 0, true), member("r1", 0, true)}},
		{name: "no replica: nothing to do without a manager", cfg: Config{Name: "w"}, state: replicaState,
			members: []api.FailoverMember{member("cm", 1, false), member("w", 0, true)}},
		// Its flocks stop while it still acts: once it says it does not,
		// it takes no flock and announces nothing.
		{name: "a replica steps down for a higher epoch", cfg: Config{Name: "r0"}, state: replicaState, acting: 2,
			members: []api.FailoverMember{member("r0", 2, true), member("r1", 3, true)},
			want:    []string{"stop-flock acting=2", "tags epoch=", "daemons @r1:1 epoch=3 list=", "tags cm=r1:1"}},
		{name: "the declared manager takes its pool back above a replica", cfg: Config{Name: "cm", Original: true}, acting: 2,
			members:  []api.FailoverMember{member("cm", 2, true), member("r1", 3, true)},
			want:     []string{"fetch r1", "daemons @self epoch=4 list=MGR", "run-flock replace=false", "tags cm=self:1 epoch=4"},
			wantEpch: 4},
		// After its hold-down the declared manager takes its pool back
		// with the acting replica's state; while the replica does not
		// answer, it follows it rather than lose what was set meanwhile.
		{name: "the declared manager takes its pool back after its hold-down", cfg: Config{Name: "cm", Original: true, HoldDown: time.Nanosecond},
			members: []api.FailoverMember{member("cm", 0, true), member("r0", 5, true)}, fetched: replicaState,
			want: []string{"fetch r0", "daemons @self epoch=6 list=MGR", "run-flock replace=false", "tags cm=self:1 epoch=6"}, wantEpch: 6},
		{name: "the declared manager waits for the acting replica's state", cfg: Config{Name: "cm", Original: true, HoldDown: time.Nanosecond},
			members: []api.FailoverMember{member("cm", 0, true), member("r0", 5, true)},
			want:    []string{"fetch r0", "daemons @r0:1 epoch=5", "tags cm=r0:1"}},
		// A replica the declared manager follows in its hold-down, which
		// the sea shows failed, may still act: the declared manager
		// takes its pool with that replica's state when it answers.
		{name: "the declared manager takes the state of the replica it followed, shown failed", cfg: Config{Name: "cm", Original: true, HoldDown: time.Minute},
			members: []api.FailoverMember{member("cm", 0, true), member("r0", 5, false)}, follows: "r0", fetched: replicaState,
			want: []string{"fetch r0", "daemons @self epoch=6 list=MGR", "run-flock replace=false", "tags cm=self:1 epoch=6"}, wantEpch: 6},
		{name: "the declared manager takes its pool when the replica it followed is gone", cfg: Config{Name: "cm", Original: true, HoldDown: time.Minute},
			members: []api.FailoverMember{member("cm", 0, true), member("r0", 5, false)}, follows: "r0",
			want: []string{"fetch r0", "daemons @self epoch=6 list=MGR", "run-flock replace=false", "tags cm=self:1 epoch=6"}, wantEpch: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Pool, tc.cfg.ManagerDaemons = "p", "MGR"
			n := &keeperNode{members: tc.members, fetched: tc.fetched}
			n.k = NewKeeper(tc.cfg, n, tc.state)
			if tc.follows != "" {
				for _, m := range tc.members {
					if m.Name == tc.follows {
						n.k.Followed(m)
					}
				}
			}
			if tc.acting > 0 {
				n.k.Acted(tc.acting, &api.FailoverState{Pool: "p", Epoch: tc.acting, Manager: tc.cfg.Name, ManagerAPI: "self:1"}, "self:1")
			}
			n.k.Step(context.Background(), tc.start)
			if !slices.Equal(n.calls, tc.want) {
				t.Errorf("calls %q, want %q", n.calls, tc.want)
			}
			if got := n.k.Acting(); got != tc.wantEpch {
				t.Errorf("acting at %d, want %d", got, tc.wantEpch)
			}
		})
	}
}

// TestTakeOverCarriesState: a replica that takes the pool from the
// manager it fetched the state of negotiates with that manager's
// replicated knobs (not those its own configuration sets) and its
// accounting merged with the one it held, keeps its flocks, stores the
// state, and replicates it, with its own knobs and accounting, to the
// pool's other live replica.
func TestTakeOverCarriesState(t *testing.T) {
	flocks, _ := json.Marshal([]api.FlockConfig{{Name: "f", Out: &api.FlockOut{}}})
	held := &api.FailoverState{Pool: "p", Epoch: 1, Manager: "cm", ManagerAPI: "cm:1", Replicas: []string{"r0", "r1"},
		Accounting: map[string]float64{"a@p": 5, "b@p": 1}}
	fetched := &api.FailoverState{Pool: "p", Epoch: 3, Manager: "r9", ManagerAPI: "r9:1", Replicas: []string{"r0", "r1"},
		Config:     map[string]string{"NEGOTIATOR_INTERVAL": "7", "PRIORITY_HALFLIFE": "60", "NEGOTIATOR_HOST": "x"},
		Accounting: map[string]float64{"a@p": 2, "b@p": 4}, Flocks: flocks}
	n := &keeperNode{own: map[string]bool{"PRIORITY_HALFLIFE": true}, replConf: map[string]string{"NEGOTIATOR_INTERVAL": "7"},
		members: []api.FailoverMember{{Name: "r0", API: "r0:1", Pool: "p", Alive: true}, {Name: "r1", API: "r1:1", Pool: "p", Alive: true}}}
	n.k = NewKeeper(Config{Pool: "p", Name: "r0", Replicas: 1, ManagerDaemons: "MGR"}, n, held)
	n.k.becomeManager(context.Background(), 4, fetched, "hand-back")

	if n.host != "" || n.set["DAEMON_LIST"] != "MGR" || n.set[wire.EpochKnob] != "4" || n.set["NEGOTIATOR_INTERVAL"] != "7" {
		t.Errorf("daemons at %q with %v: want the node itself, epoch 4 and the manager's NEGOTIATOR_INTERVAL", n.host, n.set)
	}
	if _, ok := n.set["PRIORITY_HALFLIFE"]; ok {
		t.Errorf("the node's own PRIORITY_HALFLIFE was overridden: %v", n.set)
	}
	if _, ok := n.set["NEGOTIATOR_HOST"]; ok {
		t.Errorf("a *_HOST knob was replicated: %v", n.set)
	}
	if want := map[string]float64{"a@p": 5, "b@p": 4}; !maps.Equal(n.acc, want) {
		t.Errorf("negotiator accounting %v, want %v", n.acc, want)
	}
	if len(n.flocks) != 1 || n.flocks[0].Name != "f" {
		t.Errorf("flocks %+v, want those of the fetched state", n.flocks)
	}
	if n.k.Acting() != 4 || n.saved == nil || n.saved.Epoch != 4 || n.saved.Manager != "r0" {
		t.Errorf("acting at %d, saved %+v: want epoch 4 by r0", n.k.Acting(), n.saved)
	}
	st := n.pushed["r1:1"]
	if len(n.pushed) != 1 || st == nil {
		t.Fatalf("pushed to %v, want r1 only", slices.Collect(maps.Keys(n.pushed)))
	}
	if st.Epoch != 4 || !slices.Equal(st.Replicas, []string{"r1"}) || st.Config["NEGOTIATOR_INTERVAL"] != "7" || st.Accounting["local@p"] != 1 || st.Accounting["a@p"] != 5 {
		t.Errorf("replicated %+v: want epoch 4, replica r1, the node's knobs and accounting merged", st)
	}
}

// TestKeeperReceive checks which replicated states a node keeps.
func TestKeeperReceive(t *testing.T) {
	k := NewKeeper(Config{Pool: "p", Name: "r0"}, nil, &api.FailoverState{Pool: "p", Epoch: 3})
	if known, ok := k.Receive(&api.FailoverState{Pool: "p", Epoch: 2}); ok || known != 3 {
		t.Errorf("an older epoch: ok %v, known %d", ok, known)
	}
	if _, ok := k.Receive(&api.FailoverState{Pool: "p", Epoch: 4}); !ok || k.State().Epoch != 4 {
		t.Errorf("a newer epoch: ok %v, state %+v", ok, k.State())
	}
	k.Acted(5, &api.FailoverState{Pool: "p", Epoch: 5}, "self:1")
	if _, ok := k.Receive(&api.FailoverState{Pool: "p", Epoch: 6}); !ok || k.State().Epoch != 5 {
		t.Errorf("while acting the node keeps its own state: ok %v, state %+v", ok, k.State())
	}
}
