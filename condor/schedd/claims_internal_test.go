package schedd

import (
	"maps"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
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

// TestFlockAttrs checks the attributes a job gets as it starts: the pool
// of a flocked claim, and an undefined PondFlockedTo for a job that ran
// elsewhere before and starts at home now.
func TestFlockAttrs(t *testing.T) {
	for _, tc := range []struct {
		name, pool, ad string
		want           jobqueue.Ad
	}{
		{"at home", "", `[Owner = "alice"]`, jobqueue.Ad{}},
		{"flocked", "spare", `[Owner = "alice"]`, jobqueue.Ad{AttrFlockedTo: `"spare"`, AttrLastRemotePool: `"spare"`}},
		{"home again", "", `[Owner = "alice"; PondFlockedTo = "spare"; LastRemotePool = "spare"]`, jobqueue.Ad{AttrFlockedTo: "undefined"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ad, err := classad.ParseNewAd(tc.ad)
			if err != nil {
				t.Fatal(err)
			}
			got := jobqueue.Ad{}
			flockAttrs(&claim{pool: tc.pool}, ad, got)
			if !maps.Equal(got, tc.want) {
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
}
