// Package failover keeps a pool alive when its central manager is lost.
// The manager replicates what matters (the pool's negotiator knobs, the
// negotiator's accounting and its epoch) to K replicas among the pool's
// members nearest to it in the overlay; when the manager is gone for good
// (serf says failed or left, and it stays so), the first live replica in
// the order the manager gave takes over with the next epoch, and every
// member of the pool follows the live member that holds the highest epoch.
// Epochs fence the negotiators: a startd refuses the claims of a lower
// epoch than the highest it has seen (condor/wire.EpochKnob).
//
// The package is pure: the agent (overlay/agent) watches the sea, moves
// its daemons and carries the state between nodes; this package decides.
package failover

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// Candidate is a member of the pool that could be a replica.
type Candidate struct {
	Name string
	// RTT is the estimated round-trip time to the manager (serf's
	// network coordinates); negative when unknown.
	RTT time.Duration
}

// ChooseReplicas picks k replicas among cands. The replicas of keep (the
// current ones) that are still candidates stay, in their order, so that
// the take-over order does not change with every wobble of the RTT
// estimates; the others are the nearest to the manager, those whose
// distance is unknown last, ties by name. The order it returns is the
// take-over order.
func ChooseReplicas(cands []Candidate, k int, keep []string) []string {
	if k <= 0 {
		return nil
	}
	out := make([]string, 0, min(k, len(cands)))
	seen := map[string]bool{}
	for _, name := range keep {
		if len(out) == k {
			break
		}
		if !seen[name] && slices.ContainsFunc(cands, func(c Candidate) bool { return c.Name == name }) {
			seen[name] = true
			out = append(out, name)
		}
	}
	cs := slices.Clone(cands)
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if (a.RTT < 0) != (b.RTT < 0) {
			return a.RTT >= 0
		}
		if a.RTT != b.RTT {
			return a.RTT < b.RTT
		}
		return a.Name < b.Name
	})
	for _, c := range cs {
		if len(out) == k {
			break
		}
		if c.Name == "" || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		out = append(out, c.Name)
	}
	return out
}

// HighestEpoch returns the highest epoch any member of pool shows, alive
// or not.
func HighestEpoch(members []api.FailoverMember, pool string) int64 {
	var e int64
	for _, m := range members {
		if m.Pool == pool {
			e = max(e, m.Epoch)
		}
	}
	return e
}

// TakeoverDelay is how long the replica of rank waits after the manager's
// loss is confirmed before it takes over, so that the first live replica
// in order does and the others see it: none when no replica before it is
// alive (liveBefore false), else step per rank before it, for a replica
// before it that is alive but does not act (its members may detect the
// loss seconds later than this one does).
func TakeoverDelay(rank int, liveBefore bool, step time.Duration) time.Duration {
	if rank <= 0 || !liveBefore {
		return 0
	}
	return time.Duration(rank) * step
}

// LiveBefore reports whether one of the replicas named before (those
// ahead of a replica in the take-over order) is alive among members.
func LiveBefore(members []api.FailoverMember, before []string) bool {
	for _, m := range members {
		if m.Alive && slices.Contains(before, m.Name) {
			return true
		}
	}
	return false
}

// TakeoverEpoch is the epoch the replica of rank takes over at when
// highest is the highest it knows: one more, plus its rank, so that two
// replicas of one manager that each believe themselves first (cut off from
// each other) never act at the same epoch, and fencing orders them too.
func TakeoverEpoch(highest int64, rank int) int64 {
	return highest + 1 + int64(max(rank, 0))
}

// Accounting merges accounting maps: each submitter's highest usage.
func Accounting(ms ...map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, m := range ms {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out[k] = max(out[k], m[k])
		}
	}
	return out
}
