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
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// TagEpoch is the serf tag of the node that acts as its pool's central
// manager: the epoch it negotiates at. Other nodes carry none.
const TagEpoch = "epoch"

// State is what a pool's central manager replicates to its replicas.
type State struct {
	// Pool is the pool's name.
	Pool string `json:"pool"`
	// Epoch is the manager's epoch; a node that takes over uses a higher
	// one.
	Epoch int64 `json:"epoch"`
	// Manager and ManagerAPI are the manager's node name and API address.
	Manager    string `json:"manager"`
	ManagerAPI string `json:"manager_api"`
	// Replicas are the replicas' node names in take-over order: the
	// first live one takes over.
	Replicas []string `json:"replicas"`
	// Accounting is the negotiator's accounting: each submitter's real
	// user priority (usage).
	Accounting map[string]float64 `json:"accounting,omitempty"`
	// Config holds the manager's knobs of the collector and negotiator,
	// which a replica negotiates with when it takes over.
	Config map[string]string `json:"config,omitempty"`
	// Flocks are the pool's flocks (overlay/flock's []Config, as JSON,
	// what the manager keeps in its data directory's flock/flocks.json),
	// which the node that takes over announces and flocks by; absent
	// when the sender kept none for the pool (the receiver keeps its own).
	Flocks json.RawMessage `json:"flocks,omitempty"`
	// Updated is when the manager sent the state.
	Updated time.Time `json:"updated"`
}

// Check reports what is wrong with a state received from another node.
func (s *State) Check() error {
	var errs []error
	if s.Pool == "" {
		errs = append(errs, errors.New("pool: empty"))
	}
	if s.Epoch <= 0 {
		errs = append(errs, fmt.Errorf("epoch %d: want 1 or more", s.Epoch))
	}
	if s.Manager == "" || s.ManagerAPI == "" {
		errs = append(errs, errors.New("manager: name and API address required"))
	}
	for k, v := range s.Accounting {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			errs = append(errs, fmt.Errorf("accounting of %q: %v is not a usage", k, v))
		}
	}
	for k := range s.Config {
		if !ReplicatedKnob(k) {
			errs = append(errs, fmt.Errorf("config: %s is not a knob of the collector or negotiator", k))
		}
	}
	if len(s.Flocks) > 0 {
		var list []json.RawMessage
		if err := json.Unmarshal(s.Flocks, &list); err != nil {
			errs = append(errs, fmt.Errorf("flocks: want a list: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Rank returns the position of node in the replicas' take-over order, or
// -1 when it is not a replica.
func (s *State) Rank(node string) int {
	return slices.Index(s.Replicas, node)
}

// ReplicatedKnob reports whether a knob of the manager's configuration is
// replicated: those of the collector and the negotiator (the daemons a
// replica starts when it takes over), but not their addresses
// (COLLECTOR_HOST, NEGOTIATOR_HOST: the manager's own, which a replica
// that takes over replaces with its own). Every member already has the
// rest of the pool's configuration, written by its provider.
func ReplicatedKnob(name string) bool {
	n := strings.ToUpper(name)
	if strings.HasSuffix(n, "_HOST") {
		return false
	}
	for _, p := range []string{"NEGOTIATOR_", "COLLECTOR_", "PRIORITY_", "DEFAULT_PRIO_", "CLASSAD_LIFETIME"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

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

// Member is a member of the sea as fail-over sees it.
type Member struct {
	Name  string
	API   string
	Pool  string
	Alive bool
	// Epoch is the member's TagEpoch, 0 when it has none (or a bad one).
	Epoch int64
}

// ParseEpoch reads a TagEpoch value: 0 when empty or not a positive whole
// number.
func ParseEpoch(tag string) int64 {
	e, err := strconv.ParseInt(tag, 10, 64)
	if err != nil || e < 0 {
		return 0
	}
	return e
}

// Manager returns the live member of pool that acts as its central manager:
// the one with the highest epoch (ties, which fencing makes harmless, go to
// the first name), and false when none does.
func Manager(members []Member, pool string) (Member, bool) {
	var best Member
	found := false
	for _, m := range members {
		if m.Pool != pool || !m.Alive || m.Epoch <= 0 || m.API == "" {
			continue
		}
		if !found || m.Epoch > best.Epoch || (m.Epoch == best.Epoch && m.Name < best.Name) {
			best, found = m, true
		}
	}
	return best, found
}

// HighestEpoch returns the highest epoch any member of pool shows, alive
// or not.
func HighestEpoch(members []Member, pool string) int64 {
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
func LiveBefore(members []Member, before []string) bool {
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
