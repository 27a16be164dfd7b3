package member

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/api"
)

// node is a Manager over a Node that records what it was told.
type node struct {
	m       *Manager
	ad      *classad.Ad
	busy    string
	mu      sync.Mutex
	applied []*api.Membership
	cmAlive bool
	now     time.Time
	// events records drains, resumes and leaves in order.
	events []string
}

func (n *node) Busy() string           { return n.busy }
func (n *node) MachineAd() *classad.Ad { return n.ad }

func (n *node) SetMembership(ctx context.Context, m *api.Membership) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.applied = append(n.applied, m)
	if m == nil {
		n.events = append(n.events, "leave")
	}
	return nil
}

func (n *node) Drain(ctx context.Context, evict bool) (api.DrainResult, func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	dl, _ := ctx.Deadline()
	n.events = append(n.events, fmt.Sprintf("drain evict=%v within=%v", evict, time.Until(dl).Round(time.Minute)))
	return api.DrainResult{Finished: 1}, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.events = append(n.events, "resume")
	}
}

func (n *node) CentralManagerAlive(string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmAlive
}

func newNode(t *testing.T, dir, policy string, busy string) *node {
	t.Helper()
	n := &node{cmAlive: true, busy: busy, now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), ad: classad.NewAd()}
	n.ad.SetInt("Memory", 4096)
	n.ad.SetString("Site", "sea")
	m, err := New(n, Options{
		Name:       "n1",
		DataDir:    dir,
		JoinPolicy: policy,
		Orphan:     10 * time.Second,
		Now:        func() time.Time { n.mu.Lock(); defer n.mu.Unlock(); return n.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	n.m = m
	return n
}

func (n *node) advance(d time.Duration) {
	n.mu.Lock()
	n.now = n.now.Add(d)
	n.mu.Unlock()
}

func inv(id string) api.Invitation {
	return api.Invitation{Pond: "burst", PondID: id, CentralManager: "127.0.0.1:9618", Attributes: map[string]string{"Project": `"physics"`}}
}

func TestInvitations(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		policy   string
		busy     string
		first    api.Invitation
		second   *api.Invitation
		accepted []bool
		reason   string
	}{
		{name: "accepts a free node", first: inv("a"), accepted: []bool{true}},
		{name: "one pond at a time", first: inv("a"), second: ptr(inv("b")), accepted: []bool{true, false}, reason: "already a member of pond burst"},
		{name: "same pond renews", first: inv("a"), second: ptr(inv("a")), accepted: []bool{true, true}},
		{name: "busy node declines", busy: "member of pool campus", first: inv("a"), accepted: []bool{false}, reason: "member of pool campus"},
		{name: "policy accepts", policy: `MY.Memory >= 1024 && TARGET.Project == "physics"`, first: inv("a"), accepted: []bool{true}},
		{name: "policy declines", policy: `TARGET.Project == "biology"`, first: inv("a"), accepted: []bool{false}, reason: "join policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, t.TempDir(), tt.policy, tt.busy)
			invs := []api.Invitation{tt.first}
			if tt.second != nil {
				invs = append(invs, *tt.second)
			}
			for i, iv := range invs {
				r, err := n.m.Invite(ctx, iv)
				if err != nil {
					t.Fatal(err)
				}
				if r.Accepted != tt.accepted[i] {
					t.Fatalf("invitation %d: accepted=%v (%s), want %v", i, r.Accepted, r.Reason, tt.accepted[i])
				}
				if !r.Accepted && !strings.Contains(r.Reason, tt.reason) {
					t.Fatalf("reason %q does not mention %q", r.Reason, tt.reason)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestMembershipSurvivesRestartAndReleases(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	n := newNode(t, dir, "", "")
	if r, err := n.m.Invite(ctx, inv("a")); err != nil || !r.Accepted {
		t.Fatalf("invite: %+v %v", r, err)
	}
	// A restarted agent finds its membership and re-applies it.
	n2 := newNode(t, dir, "", "")
	if c := n2.m.Current(); c == nil || c.PondID != "a" {
		t.Fatalf("membership after restart = %+v", c)
	}
	if err := n2.m.Restore(ctx); err != nil || len(n2.applied) != 1 || n2.applied[0] == nil {
		t.Fatalf("restore applied %v, err %v", n2.applied, err)
	}
	if r, err := n2.m.Release(ctx, "other", "x", api.Drain{}); err != nil || r.Released {
		t.Fatalf("release by another pond: %+v err=%v", r, err)
	}
	if r, err := n2.m.Release(ctx, "a", "x", api.Drain{}); err != nil || !r.Released {
		t.Fatalf("release: %+v err=%v", r, err)
	}
	if n2.m.Current() != nil || n2.applied[len(n2.applied)-1] != nil {
		t.Fatal("node still a member after release")
	}
	if n3 := newNode(t, dir, "", ""); n3.m.Current() != nil {
		t.Fatal("released membership came back after a restart")
	}
}

// TestRenewal checks that an invitation from the node's own pond renews its
// membership: the lease starts again or, at zero, no longer expires, and
// changed attributes are stamped on the node at once.
func TestRenewal(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		renew       func(*api.Invitation)
		wantExpires bool
		wantApplied int
		declined    bool
	}{
		{name: "another central manager", renew: func(i *api.Invitation) { i.CentralManager = "127.0.0.1:6666"; i.Lease = 0 },
			wantExpires: true, wantApplied: 1, declined: true},
		{name: "same invitation", renew: func(*api.Invitation) {}, wantExpires: true, wantApplied: 1},
		{name: "lease removed", renew: func(i *api.Invitation) { i.Lease = 0 }, wantExpires: false, wantApplied: 1},
		{name: "attributes changed", renew: func(i *api.Invitation) { i.Attributes = map[string]string{"Project": `"chemistry"`} },
			wantExpires: true, wantApplied: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, t.TempDir(), "", "")
			iv := inv("a")
			iv.Lease = time.Minute
			if _, err := n.m.Invite(ctx, iv); err != nil {
				t.Fatal(err)
			}
			first := iv
			tt.renew(&iv)
			if r, err := n.m.Invite(ctx, iv); err != nil || r.Accepted == tt.declined {
				t.Fatalf("renewal: %+v, %v", r, err)
			}
			if tt.declined {
				iv = first // nothing changed
			}
			cur := n.m.Current()
			if cur.Expires.IsZero() == tt.wantExpires {
				t.Errorf("expires %v, want an expiry: %v", cur.Expires, tt.wantExpires)
			}
			if len(n.applied) != tt.wantApplied || !maps.Equal(n.applied[len(n.applied)-1].Attributes, iv.Attributes) {
				t.Errorf("applied %d times, last with %v; want %d, %v", len(n.applied), n.applied[len(n.applied)-1].Attributes, tt.wantApplied, iv.Attributes)
			}
			if !maps.Equal(cur.Attributes, iv.Attributes) {
				t.Errorf("membership attributes %v, want %v", cur.Attributes, iv.Attributes)
			}
		})
	}
}

func TestLeaseAndOrphan(t *testing.T) {
	ctx := context.Background()
	t.Run("lease expires", func(t *testing.T) {
		n := newNode(t, t.TempDir(), "", "")
		iv := inv("a")
		iv.Lease = time.Minute
		if _, err := n.m.Invite(ctx, iv); err != nil {
			t.Fatal(err)
		}
		n.advance(30 * time.Second)
		// Renewal pushes the expiry out.
		if _, err := n.m.Invite(ctx, iv); err != nil {
			t.Fatal(err)
		}
		n.advance(45 * time.Second)
		_ = n.m.Check(ctx)
		if n.m.Current() == nil {
			t.Fatal("renewed lease expired early")
		}
		n.advance(time.Minute)
		_ = n.m.Check(ctx)
		if n.m.Current() != nil {
			t.Fatal("lease did not expire")
		}
	})
	t.Run("central manager gone", func(t *testing.T) {
		n := newNode(t, t.TempDir(), "", "")
		if _, err := n.m.Invite(ctx, inv("a")); err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		n.cmAlive = false
		n.mu.Unlock()
		_ = n.m.Check(ctx)
		n.advance(5 * time.Second)
		_ = n.m.Check(ctx)
		if n.m.Current() == nil {
			t.Fatal("withdrew before the orphan timeout")
		}
		n.advance(6 * time.Second)
		_ = n.m.Check(ctx)
		if n.m.Current() != nil {
			t.Fatal("did not withdraw after the central manager was gone")
		}
	})
}

// TestReleaseDrains checks that a member drains as its release asks before
// it leaves the pond, ends the drain after leaving, and that a membership
// that lapses evicts.
func TestReleaseDrains(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		drain api.Drain
		lapse bool
		want  []string
	}{
		{name: "default waits up to ten minutes", drain: api.Drain{}, want: []string{"drain evict=false within=10m0s", "leave", "resume"}},
		{name: "wait with a timeout", drain: api.Drain{Mode: api.DrainWait, Timeout: 3 * time.Minute}, want: []string{"drain evict=false within=3m0s", "leave", "resume"}},
		{name: "evict", drain: api.Drain{Mode: api.DrainEvict}, want: []string{"drain evict=true within=10m0s", "leave", "resume"}},
		{name: "lease lapses: evict at once", lapse: true, want: []string{"drain evict=true within=0s", "leave", "resume"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, t.TempDir(), "", "")
			i := inv("a")
			i.Lease = time.Minute
			if r, err := n.m.Invite(ctx, i); err != nil || !r.Accepted {
				t.Fatalf("invite: %+v %v", r, err)
			}
			if tt.lapse {
				n.advance(2 * time.Minute)
				if err := n.m.Check(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				r, err := n.m.Release(ctx, "a", "test", tt.drain)
				if err != nil || !r.Released || r.Drain.Finished != 1 {
					t.Fatalf("release: %+v %v", r, err)
				}
			}
			if n.m.Current() != nil {
				t.Fatal("still a member")
			}
			if !slices.Equal(n.events, tt.want) {
				t.Fatalf("events = %q, want %q", n.events, tt.want)
			}
		})
	}
	t.Run("bad mode", func(t *testing.T) {
		n := newNode(t, t.TempDir(), "", "")
		if _, err := n.m.Invite(ctx, inv("a")); err != nil {
			t.Fatal(err)
		}
		if _, err := n.m.Release(ctx, "a", "test", api.Drain{Mode: "soon"}); err == nil {
			t.Fatal("a bad drain mode was taken")
		}
		if n.m.Current() == nil || len(n.events) != 0 {
			t.Fatalf("a refused release changed the node: %q", n.events)
		}
	})
}
