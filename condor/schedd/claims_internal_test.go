package schedd

import (
	"maps"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
)

// TestFinishClaimKeepsNewerClaim lets go of a claim whose job was requeued
// and matched again meanwhile: the job's new claim must stay, or the
// schedd would refuse the new startd's reports and kill the job there.
func TestFinishClaimKeepsNewerClaim(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// TestWaiting checks when an idle job waits for another pool: idle for
// FLOCK_IDLE_TIME and left unmatched by a cycle of its own pool since, or
// idle three times as long when no cycle came.
func TestWaiting(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	idle := 10 * time.Second
	for _, tc := range []struct {
		name      string
		idleFor   time.Duration
		homeCycle time.Duration // after the job became idle; negative: before
		want      bool
	}{
		{"fresh", 5 * time.Second, 2 * time.Second, false},
		{"idle long enough, a cycle since", 11 * time.Second, 2 * time.Second, true},
		{"idle long enough, no cycle since", 11 * time.Second, -time.Second, false},
		{"no cycle for three times as long", 30 * time.Second, -time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Schedd{}
			ij := &idleJob{since: t0}
			s.fl.homeCycle = t0.Add(tc.homeCycle)
			if got := s.waiting(ij, t0.Add(tc.idleFor), idle); got != tc.want {
				t.Errorf("waiting = %v, want %v", got, tc.want)
			}
		})
	}
}
