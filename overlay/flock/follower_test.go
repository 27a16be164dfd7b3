package flock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// followerNode is a FollowerNode whose central manager answers what the
// test sets, and whose destination collectors count what it sets.
type followerNode struct {
	mu      sync.Mutex
	cm      string
	status  *api.FlockStatus
	err     error
	claimed map[string]int // by collector address; absent: the collector fails
	asked   []string
}

func (n *followerNode) Manager() *Manager      { return nil }
func (n *followerNode) CentralManager() string { return n.cm }
func (n *followerNode) PoolMembers() map[string]bool {
	return map[string]bool{"busy-1": true}
}

func (n *followerNode) FetchStatus(_ context.Context, addr string) (*api.FlockStatus, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked = append(n.asked, addr)
	return n.status, n.err
}

func (n *followerNode) CountClaimed(_ context.Context, addr string, _ map[string]bool) (int, error) {
	c, ok := n.claimed[addr]
	if !ok {
		return 0, errors.New("collector down")
	}
	return c, nil
}

// TestFollower follows a central manager's flocking on a member: the
// pools it admits until their announcements expire, the list it gave last
// while it does not answer, none once the node has no manager to follow,
// and the counts of the pool's jobs elsewhere, kept when a collector
// fails.
func TestFollower(t *testing.T) {
	now := time.Now()
	cand := func(pool, addr string, expires time.Time, maxJobs int) api.FlockCandidate {
		return api.FlockCandidate{FlockAnnouncement: api.FlockAnnouncement{Pool: pool, API: addr, Expires: expires}, MaxJobs: maxJobs}
	}
	n := &followerNode{cm: "cm:1", status: &api.FlockStatus{
		Willing:  []api.FlockCandidate{cand("ignored", "i:1", now.Add(time.Hour), 0)},
		Admitted: []api.FlockCandidate{cand("spare", "s:1", now.Add(time.Hour), 2), cand("old", "o:1", now.Add(-time.Second), 0)},
	}, claimed: map[string]int{"s:1": 3}}
	f := NewFollower(n, nil)
	ctx := t.Context()
	if got := f.Candidates(); len(got) != 0 {
		t.Fatalf("before following: %v", got)
	}
	f.FollowOnce(ctx, time.Second)
	if got := f.Candidates(); len(got) != 1 || got[0].Pool != "spare" {
		t.Fatalf("after following: %+v, want the admitted pool whose announcement holds", got)
	}
	f.CountOnce(ctx, time.Second)
	if got := f.Others(); got["spare"] != 3 {
		t.Fatalf("counts %v, want spare: 3", got)
	}
	n.claimed = map[string]int{}
	f.CountOnce(ctx, time.Second)
	if got := f.Others(); got["spare"] != 3 {
		t.Fatalf("a failing collector: counts %v, want the last one kept", got)
	}
	n.status, n.err = nil, errors.New("being replaced")
	f.FollowOnce(ctx, time.Second)
	if got := f.Candidates(); len(got) != 1 {
		t.Fatalf("a manager that does not answer: %+v, want the list it gave last", got)
	}
	n.cm = ""
	f.FollowOnce(ctx, time.Second)
	if got := f.Candidates(); len(got) != 0 {
		t.Fatalf("no manager to follow: %+v, want none", got)
	}
	if len(n.asked) != 2 {
		t.Errorf("asked the manager %d times, want 2", len(n.asked))
	}
}
