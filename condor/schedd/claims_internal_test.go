package schedd

import (
	"testing"

	"github.com/pond-htc/pond/condor/jobqueue"
)

// TestFinishClaimKeepsNewerClaim lets go of a claim whose job was requeued
// and matched again meanwhile: the job's new claim must stay, or the
// schedd would refuse the new startd's reports and kill the job there.
func TestFinishClaimKeepsNewerClaim(t *testing.T) {
	s := &Schedd{active: map[jobqueue.JobID]*claim{}, claims: map[string]*claim{}}
	id := jobqueue.JobID{Cluster: 1}
	old := &claim{id: "old", job: id}
	newer := &claim{id: "new", job: id}
	s.claims[old.id], s.claims[newer.id], s.active[id] = old, newer, newer
	s.finishClaim(old)
	if s.active[id] != newer || s.claims[newer.id] != newer || s.claims[old.id] != nil {
		t.Errorf("after finishing the old claim: active %+v, claims %v", s.active[id], s.claims)
	}
	s.finishClaim(newer)
	if len(s.active) != 0 || len(s.claims) != 0 {
		t.Errorf("after finishing both: active %v, claims %v", s.active, s.claims)
	}
}
