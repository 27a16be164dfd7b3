package negotiator

import (
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

func mustAd(t *testing.T, src string) *classad.Ad {
	t.Helper()
	ad, err := classad.ParseOldAd(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return ad
}

// claimedSlot is a claimed slot running a job of user with the machine's
// Rank of it cur; extra is more of its ad (old ClassAd lines).
func claimedSlot(t *testing.T, name, user string, cur float64, rank, extra string) *Slot {
	src := "Name = \"" + name + "\"\nState = \"Claimed\"\nCpus = 1\nMemory = 1024\nDisk = 100000\nRequirements = true\n" +
		"RemoteUser = \"" + user + "\"\nCurrentRank = " + classad.Real(cur).String() + "\nRank = " + rank + "\n" + extra
	return NewSlot(mustAd(t, src), "startd:1", "preempt-"+name)
}

func TestPreemptDecisions(t *testing.T) {
	t.Parallel()
	prios := map[string]float64{"low@x": 5000, "high@x": 500, "mid@x": 1000}
	prio := func(u string) float64 {
		if p, ok := prios[u]; ok {
			return p
		}
		return 500
	}
	job := func(user, extra string) Job {
		return Job{ID: user + "-1.0", Ad: mustAd(t, "Owner = \""+user+"\"\nUser = \""+user+"\"\nRequestCpus = 1\nRequestMemory = 100\n"+
			"Requirements = true\nRank = 0\nPondLocal = "+extra)}
	}
	sub := func(name string, jobs ...Job) Submitter {
		return Submitter{Name: name, Schedd: "schedd:1", Priority: prio(name), Jobs: jobs}
	}
	yes := classad.MustParseExpr("true")
	cases := []struct {
		name    string
		slots   []*Slot
		subs    []Submitter
		pol     PreemptPolicy
		want    map[string]string // job id -> slot name
		wantNil bool
	}{
		{
			name:    "PREEMPTION_REQUIREMENTS False (HTCondor's default) stops priority preemption",
			slots:   []*Slot{claimedSlot(t, "s1", "low@x", 0, "0", "")},
			subs:    []Submitter{sub("high@x", job("high@x", "false"))},
			pol:     PreemptPolicy{Consider: true},
			wantNil: true,
		},
		{
			name:  "a better priority preempts a worse one when PREEMPTION_REQUIREMENTS holds",
			slots: []*Slot{claimedSlot(t, "s1", "low@x", 0, "0", "")},
			subs:  []Submitter{sub("high@x", job("high@x", "false"))},
			pol:   PreemptPolicy{Consider: true, Requirements: yes},
			want:  map[string]string{"high@x-1.0": "s1"},
		},
		{
			name:    "a worse priority never preempts a better one",
			slots:   []*Slot{claimedSlot(t, "s1", "high@x", 0, "0", "")},
			subs:    []Submitter{sub("low@x", job("low@x", "false"))},
			pol:     PreemptPolicy{Consider: true, Requirements: yes},
			wantNil: true,
		},
		{
			name:    "PREEMPTION_REQUIREMENTS sees RemoteUserPrio and SubmitterUserPrio",
			slots:   []*Slot{claimedSlot(t, "s1", "mid@x", 0, "0", "")},
			subs:    []Submitter{sub("high@x", job("high@x", "false"))},
			pol:     PreemptPolicy{Consider: true, Requirements: classad.MustParseExpr("RemoteUserPrio > TARGET.SubmitterUserPrio * 4")},
			wantNil: true, // 1000 is not more than 4 * 500
		},
		{
			name:    "NEGOTIATOR_CONSIDER_PREEMPTION False preempts nothing",
			slots:   []*Slot{claimedSlot(t, "s1", "low@x", 0, "TARGET.PondLocal =?= true", "")},
			subs:    []Submitter{sub("high@x", job("high@x", "true"))},
			pol:     PreemptPolicy{Consider: false, Requirements: yes},
			wantNil: true,
		},
		{
			name:  "rank preemption: the machine ranks the job higher, whatever the priorities",
			slots: []*Slot{claimedSlot(t, "s1", "high@x", 0, "ifThenElse(TARGET.PondLocal =?= true, 10, 0)", "")},
			subs:  []Submitter{sub("low@x", job("low@x", "true"))},
			pol:   PreemptPolicy{Consider: true},
			want:  map[string]string{"low@x-1.0": "s1"},
		},
		{
			name:    "no rank preemption when the machine ranks the job the same",
			slots:   []*Slot{claimedSlot(t, "s1", "high@x", 10, "ifThenElse(TARGET.PondLocal =?= true, 10, 0)", "")},
			subs:    []Submitter{sub("low@x", job("low@x", "true"))},
			pol:     PreemptPolicy{Consider: true},
			wantNil: true,
		},
		{
			name:    "no priority preemption of a job the machine ranks higher",
			slots:   []*Slot{claimedSlot(t, "s1", "low@x", 10, "ifThenElse(TARGET.PondLocal =?= true, 10, 0)", "")},
			subs:    []Submitter{sub("high@x", job("high@x", "false"))},
			pol:     PreemptPolicy{Consider: true, Requirements: yes},
			wantNil: true,
		},
		{
			name: "PREEMPTION_RANK picks the slot to preempt",
			slots: []*Slot{claimedSlot(t, "s1", "low@x", 0, "0", "TotalJobRunTime = 50"),
				claimedSlot(t, "s2", "low@x", 0, "0", "TotalJobRunTime = 5")},
			subs: []Submitter{sub("high@x", job("high@x", "false"))},
			pol:  PreemptPolicy{Consider: true, Requirements: yes, Rank: classad.MustParseExpr("-TotalJobRunTime")},
			want: map[string]string{"high@x-1.0": "s2"},
		},
		{
			name: "rank preemption comes before priority preemption",
			slots: []*Slot{claimedSlot(t, "s1", "low@x", 0, "0", ""),
				claimedSlot(t, "s2", "mid@x", 0, "ifThenElse(TARGET.PondLocal =?= true, 1, 0)", "")},
			subs: []Submitter{sub("high@x", job("high@x", "true"))},
			pol:  PreemptPolicy{Consider: true, Requirements: yes},
			want: map[string]string{"high@x-1.0": "s2"},
		},
		{
			name:    "a job larger than the claimed slot does not preempt it",
			slots:   []*Slot{claimedSlot(t, "s1", "low@x", 0, "10", "")},
			subs:    []Submitter{sub("high@x", Job{ID: "big", Ad: mustAd(t, "RequestCpus = 4\nRequirements = true")})},
			pol:     PreemptPolicy{Consider: true, Requirements: yes},
			wantNil: true,
		},
		{
			name:    "a slot whose START rejects the job is not preempted",
			slots:   []*Slot{claimedSlot(t, "s1", "low@x", 0, "10", "Requirements = TARGET.PondLocal =?= true")},
			subs:    []Submitter{sub("high@x", job("high@x", "false"))},
			pol:     PreemptPolicy{Consider: true, Requirements: yes},
			wantNil: true,
		},
		{
			name:  "a slot is preempted once a cycle",
			slots: []*Slot{claimedSlot(t, "s1", "low@x", 0, "0", "")},
			subs: []Submitter{sub("high@x", job("high@x", "false"),
				Job{ID: "high@x-2.0", Ad: mustAd(t, "RequestCpus = 1\nRequirements = true")})},
			pol:  PreemptPolicy{Consider: true, Requirements: yes},
			want: map[string]string{"high@x-1.0": "s1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Preempt(nil, tc.slots, tc.subs, prio, nil, 8, tc.pol)
			if tc.wantNil {
				if len(got) != 0 {
					t.Fatalf("preempted %s for %s; want none", got[0].Slot.Name, got[0].Job.ID)
				}
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d preemptions; want %d", len(got), len(tc.want))
			}
			for _, m := range got {
				if tc.want[m.Job.ID] != m.Slot.Name || !m.Preempt || m.Slot.ClaimID != "preempt-"+m.Slot.Name {
					t.Errorf("job %s preempts %s (preempt %v, claim %s); want %s", m.Job.ID, m.Slot.Name, m.Preempt,
						m.Slot.ClaimID, tc.want[m.Job.ID])
				}
			}
		})
	}
}

// TestPreemptByPriorityWithinFairShare checks that a user of better
// priority preempts only up to its pie slice of the pool.
func TestPreemptByPriorityWithinFairShare(t *testing.T) {
	t.Parallel()
	var slots []*Slot
	for _, n := range []string{"s1", "s2", "s3", "s4"} {
		slots = append(slots, claimedSlot(t, n, "low@x", 0, "0", ""))
	}
	var jobs []Job
	for _, id := range []string{"1.0", "1.1", "1.2", "1.3"} {
		jobs = append(jobs, Job{ID: id, Ad: mustAd(t, "RequestCpus = 1\nRequirements = true")})
	}
	// Equal shares of 4 cpus between two submitters: 2 each.
	subs := []Submitter{{Name: "high@x", Priority: 500, Jobs: jobs}, {Name: "low@x", Priority: 500}}
	prio := func(u string) float64 { return map[string]float64{"low@x": 5000}[u] + 500 }
	got := Preempt(nil, slots, subs, prio, nil, 4, PreemptPolicy{Consider: true, Requirements: classad.MustParseExpr("true")})
	if len(got) != 2 {
		t.Fatalf("%d preemptions; want 2 (the fair share)", len(got))
	}
}

func TestReadPreemptPolicy(t *testing.T) {
	t.Parallel()
	cfg := config.New(config.Options{})
	p, err := ReadPreemptPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// HTCondor's defaults: preemption considered, but no user's priority
	// preempts another's.
	if !p.Consider || p.Requirements == nil || classad.EvalWith(p.Requirements, nil, nil).IsTrue() {
		t.Errorf("defaults: %+v", p)
	}
	cfg.Set("PREEMPTION_REQUIREMENTS", "RemoteUserPrio > ")
	if _, err := ReadPreemptPolicy(cfg); err == nil {
		t.Error("a bad PREEMPTION_REQUIREMENTS is accepted")
	}
}
