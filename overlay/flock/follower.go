package flock

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// FollowerNode is what a pool's member does to flock as its pool's acting
// central manager says; the agent implements it.
type FollowerNode interface {
	// Manager is the running flock Manager when the node acts as its
	// pool's central manager, nil otherwise.
	Manager() *Manager
	// CentralManager is the API address of the central manager the node
	// follows; "" when it has none or is it.
	CentralManager() string
	// FetchStatus asks the central manager at addr for its flocking.
	FetchStatus(ctx context.Context, addr string) (*api.FlockStatus, error)
	// PoolMembers names the other members of the node's pool, in lower
	// case.
	PoolMembers() map[string]bool
	// CountClaimed counts the claimed slots of the collector at addr
	// whose claiming schedd is one of mine (lower case).
	CountClaimed(ctx context.Context, addr string, mine map[string]bool) (int, error)
}

// Follower keeps, on a member of a pool that does not act as its central
// manager, the pools its schedd may flock to as the manager said last,
// and how many jobs of the pool's other schedds run in each of them.
type Follower struct {
	node   FollowerNode
	logger *slog.Logger
	// remote is what the node last learnt from its manager of the pools
	// its schedd may flock to.
	remote atomic.Pointer[[]api.FlockCandidate]
	// others is, by pool name (lower case), how many jobs of the other
	// schedds of the node's pool run in each pool it may flock to with a
	// max_jobs (Count).
	others atomic.Pointer[map[string]int]
}

// NewFollower returns the Follower of node; a nil logger logs nothing.
func NewFollower(node FollowerNode, logger *slog.Logger) *Follower {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Follower{node: node, logger: logger}
}

// Follow asks the pool's acting central manager, every interval until ctx
// ends, for the pools its flocks admit, for the node's schedd to flock to
// while the node is not the manager. A manager that does not answer (it
// is being replaced) leaves the list it gave last, whose announcements
// expire in their time.
func (f *Follower) Follow(ctx context.Context, interval time.Duration) {
	every(ctx, interval, f.FollowOnce)
}

// FollowOnce is one round of Follow.
func (f *Follower) FollowOnce(ctx context.Context, interval time.Duration) {
	cm := f.node.CentralManager()
	if f.node.Manager() != nil || cm == "" {
		f.remote.Store(nil)
		return
	}
	qctx, cancel := context.WithTimeout(ctx, interval)
	st, err := f.node.FetchStatus(qctx, cm)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			f.logger.Debug("asking the pool's central manager for the pools to flock to", "cm", cm, "err", err)
		}
		return
	}
	list := st.Admitted
	if list == nil {
		list = st.Willing
	}
	f.remote.Store(&list)
}

// Candidates are the pools the node's pool's flocks admit, nearest first:
// on the acting central manager, from its flock Manager; on the pool's
// other members, what the manager said last (Follow), but the pools whose
// announcements expired since.
func (f *Follower) Candidates() []api.FlockCandidate {
	if m := f.node.Manager(); m != nil {
		return m.Admitted()
	}
	var cands []api.FlockCandidate
	if p := f.remote.Load(); p != nil {
		now := time.Now()
		for _, c := range *p {
			if now.Before(c.Expires) {
				cands = append(cands, c)
			}
		}
	}
	return cands
}

// Others is, by pool name (lower case), how many jobs of the other
// schedds of the node's pool run in each pool it may flock to with a
// max_jobs, as Count found last; nil before it did.
func (f *Follower) Others() map[string]int {
	if p := f.others.Load(); p != nil {
		return *p
	}
	return nil
}

// Count counts, every interval until ctx ends, the jobs of the other
// schedds of the node's pool that run in each pool the node's schedd may
// flock to with a max_jobs: the claimed slots of that pool's collector
// whose claiming schedd is another member of the node's pool. The schedd
// adds them to its own jobs there, so that max_jobs bounds the pool's
// jobs in the destination, not each schedd's. A collector that does not
// answer keeps the count it gave last.
func (f *Follower) Count(ctx context.Context, interval time.Duration) {
	every(ctx, interval, f.CountOnce)
}

// CountOnce is one round of Count.
func (f *Follower) CountOnce(ctx context.Context, interval time.Duration) {
	mine := f.node.PoolMembers()
	old := f.Others()
	counts := map[string]int{}
	for _, c := range f.Candidates() {
		if c.MaxJobs <= 0 {
			continue
		}
		pool := strings.ToLower(c.Pool)
		n, err := 0, error(nil)
		if len(mine) > 0 {
			qctx, cancel := context.WithTimeout(ctx, interval)
			n, err = f.node.CountClaimed(qctx, c.API, mine)
			cancel()
		}
		if err != nil {
			if ctx.Err() == nil {
				f.logger.Debug("counting the pool's jobs flocked to a pool", "pool", c.Pool, "err", err)
			}
			n = old[pool]
		}
		counts[pool] = n
	}
	f.others.Store(&counts)
}

// every calls step every interval, with that interval, until ctx ends.
func every(ctx context.Context, interval time.Duration, step func(context.Context, time.Duration)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		step(ctx, interval)
	}
}
