package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// FailoverState is what a pool's central manager replicates to its
// replicas (PUT /v1/failover); overlay/failover decides with it.
type FailoverState struct {
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
func (s *FailoverState) Check() error {
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
func (s *FailoverState) Rank(node string) int {
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

// FailoverMember is a member of the sea as fail-over sees it
// (overlay/failover).
type FailoverMember struct {
	Name  string
	API   string
	Pool  string
	Alive bool
	// Epoch is the member's TagEpoch, 0 when it has none (or a bad one).
	Epoch int64
}

// FailoverManager returns the live member of pool that acts as its central manager:
// the one with the highest epoch (ties, which fencing makes harmless, go to
// the first name), and false when none does.
func FailoverManager(members []FailoverMember, pool string) (FailoverMember, bool) {
	var best FailoverMember
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
