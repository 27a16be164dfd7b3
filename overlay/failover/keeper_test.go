package failover

import (
	"context"
	"fmt"
	"github.com/pond-htc/pond/overlay/api"
	"slices"
	"sync"
	"testing"
	"time"
)

// keeperNode is a Node that records what its Keeper told it, and tells
// the Keeper what it did as the agent does.
type keeperNode struct {
	k       *Keeper
	members []api.FailoverMember
	fetched *api.FailoverState
	mu      sync.Mutex
	calls   []string
}

func (n *keeperNode) record(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, fmt.Sprintf(format, args...))
}

func (n *keeperNode) Members() []api.FailoverMember { return n.members }
func (n *keeperNode) ConfirmDelay() time.Duration   { return 0 }
func (n *keeperNode) OwnPoolProven() bool           { return true }
func (n *keeperNode) StopFlock()                    { n.record("stop-flock") }
func (n *keeperNode) Replicate(context.Context)     { n.record("replicate") }

func (n *keeperNode) FetchState(mgr api.FailoverMember) *api.FailoverState {
	n.record("fetch %s", mgr.Name)
	return n.fetched
}

func (n *keeperNode) BecomeManager(epoch int64, from *api.FailoverState, why string) {
	n.record("become %d %s from=%v", epoch, why, from != nil)
	n.k.Acted(epoch, &api.FailoverState{Pool: n.k.cfg.Pool, Epoch: epoch, Manager: n.k.cfg.Name, ManagerAPI: "self:1"}, "self:1")
}

func (n *keeperNode) StepDown(mgr api.FailoverMember) {
	n.k.StepDown()
	n.record("step-down to %s", mgr.Name)
}

func (n *keeperNode) Follow(mgr api.FailoverMember) {
	n.record("follow %s %d", mgr.Name, mgr.Epoch)
	n.k.Followed(mgr)
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
		want     []string
		wantEpch int64
	}{
		{name: "declared manager starts alone", cfg: Config{Name: "cm", Original: true},
			members: []api.FailoverMember{member("cm", 0, true)}, start: true,
			want: []string{"become 1 start from=false"}, wantEpch: 1},
		{name: "declared manager back while a replica acts, with a hold-down", cfg: Config{Name: "cm", Original: true, HoldDown: time.Minute},
			members: []api.FailoverMember{member("cm", 0, true), member("r0", 5, true)}, start: true,
			want: []string{"stop-flock", "follow r0 5"}},
		{name: "declared manager back while a replica acts, no hold-down", cfg: Config{Name: "cm", Original: true},
			members: []api.FailoverMember{member("cm", 0, true), member("r0", 5, true)}, start: true,
			want: []string{"fetch r0", "become 6 start from=false"}, wantEpch: 6},
		{name: "member follows the acting manager", cfg: Config{Name: "w"},
			members: []api.FailoverMember{member("cm", 2, true), member("w", 0, true)},
			want:    []string{"follow cm 2"}},
		{name: "first replica takes over from a failed manager", cfg: Config{Name: "r0"}, state: replicaState,
			members: []api.FailoverMember{member("cm", 1, false), member("r0", 0, true), member("r1", 0, true)},
			want:    []string{"become 2 take-over from=false"}, wantEpch: 2},
		{name: "second replica waits while the first is alive", cfg: Config{Name: "r1", Step: time.Hour}, state: replicaState,
			members: []api.FailoverMember{member("cm", 1, false), member("r0", 0, true), member("r1", 0, true)}},
		{name: "no replica: nothing to do without a manager", cfg: Config{Name: "w"}, state: replicaState,
			members: []api.FailoverMember{member("cm", 1, false), member("w", 0, true)}},
		{name: "a replica steps down for a higher epoch", cfg: Config{Name: "r0"}, state: replicaState, acting: 2,
			members: []api.FailoverMember{member("r0", 2, true), member("r1", 3, true)},
			want:    []string{"step-down to r1"}},
		{name: "the declared manager takes its pool back above a replica", cfg: Config{Name: "cm", Original: true}, acting: 2,
			members: []api.FailoverMember{member("cm", 2, true), member("r1", 3, true)},
			want:    []string{"fetch r1", "become 4 hand-back from=false"}, wantEpch: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Pool = "p"
			n := &keeperNode{members: tc.members}
			n.k = NewKeeper(tc.cfg, n, tc.state)
			if tc.acting > 0 {
				n.k.Acted(tc.acting, &api.FailoverState{Pool: "p", Epoch: tc.acting, Manager: tc.cfg.Name, ManagerAPI: "self:1"}, "self:1")
			}
			n.k.Step(tc.start)
			if !slices.Equal(n.calls, tc.want) {
				t.Errorf("calls %q, want %q", n.calls, tc.want)
			}
			if got := n.k.Acting(); got != tc.wantEpch {
				t.Errorf("acting at %d, want %d", got, tc.wantEpch)
			}
		})
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
