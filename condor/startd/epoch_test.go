package startd

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

// staticClaim returns the claim id of the startd's unclaimed static slot n.
func staticClaim(t *testing.T, s *Startd, n int) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sl := range s.claims {
		if !sl.partitionable && sl.state == "Unclaimed" && sl.id == n {
			return id
		}
	}
	t.Fatalf("no unclaimed static slot %d", n)
	return ""
}

// TestClaimEpochFencing checks that a startd refuses the claims of a
// negotiator whose central-manager epoch is lower than the highest it has
// seen, in its configuration or in a claim it granted, and that a node
// leaving a fail-over pool (the knob unset) stops fencing.
func TestClaimEpochFencing(t *testing.T) {
	job := wire.Ad{"Owner": `"alice"`, "RequestCpus": "1", "RequestMemory": "10", "RequestDisk": "10", "Requirements": "true"}
	type step struct {
		reconfig string // value of POND_CM_EPOCH to reconfigure with first; "-" for none
		slot     int    // static slot to claim
		epoch    int64  // epoch of the claim
		stale    bool   // the claim must be refused as stale
	}
	tests := []struct {
		name  string
		knob  string // POND_CM_EPOCH at start; "" unset
		steps []step
		want  int64 // the startd's epoch at the end
	}{
		{"no fail-over", "", []step{{"-", 1, 0, false}}, 0},
		{"same epoch", "2", []step{{"-", 1, 2, false}}, 2},
		{"lower epoch refused", "2", []step{{"-", 1, 1, true}, {"-", 1, 0, true}}, 2},
		{"higher claim raises the fence", "1", []step{{"-", 1, 3, false}, {"-", 2, 2, true}}, 3},
		{"reconfigured to a higher epoch", "1", []step{{"4", 1, 3, true}, {"-", 1, 4, false}}, 4},
		{"a lower knob does not lower it", "5", []step{{"3", 1, 4, true}}, 5},
		{"leaving the pool ends fencing", "5", []step{{"", 1, 0, false}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			knobs := map[string]string{"NUM_CPUS": "2", "MEMORY": "1000", "NUM_SLOTS": "2"}
			if tt.knob != "" {
				knobs[wire.EpochKnob] = tt.knob
			}
			s := newStartd(t, knobs)
			for i, st := range tt.steps {
				if st.reconfig != "-" {
					cfg := config.New(config.Options{})
					for k, v := range knobs {
						cfg.Set(k, v)
					}
					cfg.Unset(wire.EpochKnob)
					if st.reconfig != "" {
						cfg.Set(wire.EpochKnob, st.reconfig)
					}
					if err := s.Reconfig(cfg); err != nil {
						t.Fatal(err)
					}
				}
				_, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: staticClaim(t, s, st.slot), Job: job, Epoch: st.epoch})
				if st.stale {
					if !errors.Is(err, ErrStaleEpoch) || !errors.Is(err, wire.ErrConflict) {
						t.Errorf("step %d: claim of epoch %d: %v, want a stale-epoch conflict", i, st.epoch, err)
					}
				} else if err != nil {
					t.Errorf("step %d: claim of epoch %d: %v", i, st.epoch, err)
				}
			}
			if got := s.Epoch(); got != tt.want {
				t.Errorf("epoch %d, want %d", got, tt.want)
			}
		})
	}
}

// TestBadEpochKnob checks that a negative or non-numeric epoch is refused,
// naming the knob.
func TestBadEpochKnob(t *testing.T) {
	for _, v := range []string{"-1", "two"} {
		cfg := config.New(config.Options{})
		cfg.Set(wire.EpochKnob, v)
		_, err := New(Options{Config: cfg, DataDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), wire.EpochKnob) {
			t.Errorf("%s = %s: %v, want an error naming the knob", wire.EpochKnob, v, err)
		}
	}
}
