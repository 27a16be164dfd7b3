package tools

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
)

func mustAd(t *testing.T, src string) *classad.Ad {
	t.Helper()
	a, err := classad.ParseAd(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return a
}

// TestAnalyze checks condor_q -better-analyze's answer for an idle job
// held back by each thing that may hold it back, and for a job nothing
// holds back.
func TestAnalyze(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	const job = `[ClusterId = 7; ProcId = 0; JobStatus = 1; Owner = "alice"; User = "alice@pool"; RequestMemory = 128;
		Requirements = (TARGET.Arch == "X86_64") && (TARGET.Memory >= RequestMemory) %s; %s]`
	slot := func(i int, state, owner string) string {
		s := fmt.Sprintf(`[Name = "slot%d@n"; Arch = "X86_64"; Memory = 1024; State = "%s"; Requirements = true`, i, state)
		if owner != "" {
			s += fmt.Sprintf(`; RemoteOwner = "%s"`, owner)
		}
		return s + "]"
	}
	free := []string{slot(1, "Unclaimed", ""), slot(2, "Unclaimed", ""), slot(3, "Claimed", "bob")}
	busy := []string{slot(1, "Claimed", "alice"), slot(2, "Claimed", "bob"), slot(3, "Owner", "")}
	cases := []struct {
		name        string
		req, extra  string
		slots       []string
		schedd, neg string
		counts      [6]int // rejected by job, by slot, yours, others, unavailable, available
		kinds       string // the blockers' kinds and names
		text        []string
	}{
		{name: "runs soon", slots: free, counts: [6]int{0, 0, 0, 1, 0, 2}, kinds: "",
			text: []string{"Run analysis summary.  Of 3 slots", "      2 are able to run your job", "[1]           3  TARGET.Memory >= RequestMemory"}},
		{name: "requirements", req: "&& (Memory > 10000000)", slots: free, counts: [6]int{3, 0, 0, 0, 0, 0},
			kinds: "requirements:Memory > 10000000",
			text:  []string{"[2]           0  Memory > 10000000", "Condition [2] Memory > 10000000 rejects 3 of the 3 slots", "RequestMemory = 128"}},
		{name: "busy", slots: busy, counts: [6]int{0, 0, 1, 1, 1, 0}, kinds: "busy:",
			text: []string{"1 match and are already running your jobs", "1 match but are not available"}},
		{name: "max jobs running", slots: free, schedd: `[MaxJobsRunning = 2; PondJobsStarted = 2]`, counts: [6]int{0, 0, 0, 1, 0, 2},
			kinds: "schedd-limit:MAX_JOBS_RUNNING", text: []string{"The schedd runs 2 jobs, MAX_JOBS_RUNNING = 2"}},
		{name: "room under max jobs running", slots: free, schedd: `[MaxJobsRunning = 3; PondJobsStarted = 2]`, counts: [6]int{0, 0, 0, 1, 0, 2}},
		{name: "start window", slots: free, counts: [6]int{0, 0, 0, 1, 0, 2},
			schedd: fmt.Sprintf(`[MaxJobsRunning = 10; PondJobsStarted = 1; PondJobStartCount = 1; PondJobStartDelay = 30; PondJobStartsResume = %d]`, now.Unix()+20),
			kinds:  "schedd-limit:JOB_START_COUNT", text: []string{"JOB_START_COUNT = 1 jobs in its JOB_START_DELAY = 30 s window: it starts more in 20 s"}},
		{name: "start window over", slots: free, counts: [6]int{0, 0, 0, 1, 0, 2},
			schedd: fmt.Sprintf(`[PondJobStartCount = 1; PondJobStartDelay = 30; PondJobStartsResume = %d]`, now.Unix()-1)},
		{name: "concurrency limit", extra: `ConcurrencyLimits = "xsw,db:2"`, slots: free, counts: [6]int{0, 0, 0, 1, 0, 2},
			neg:   `[ConcurrencyLimit_xsw = 3.0; PondConcurrencyLimitMax_xsw = 3.0; PondConcurrencyLimitBlocked_xsw = 7; ConcurrencyLimit_db = 1.0; PondConcurrencyLimitMax_db = 4.0]`,
			kinds: "concurrency-limit:xsw", text: []string{"Concurrency limit xsw is full: 3 of 3 in use, the job needs 1 (it held back 7 idle jobs"}},
		{name: "weighted limit", extra: `ConcurrencyLimits = "db:2"`, slots: free, counts: [6]int{0, 0, 0, 1, 0, 2},
			neg: `[ConcurrencyLimit_db = 3.0; PondConcurrencyLimitMax_db = 4.0]`, kinds: "concurrency-limit:db"},
		{name: "unbounded limit", extra: `ConcurrencyLimits = "other"`, slots: free, counts: [6]int{0, 0, 0, 1, 0, 2},
			neg: `[ConcurrencyLimit_other = 30.0]`},
		{name: "unusable limits", extra: `ConcurrencyLimits = "a:b"`, slots: free, counts: [6]int{0, 0, 0, 1, 0, 2},
			kinds: "concurrency-limit:a:b"},
		{name: "priority", slots: busy, counts: [6]int{0, 0, 1, 1, 1, 0},
			neg:   `[PondSubmitterShares = { [Name = "alice@pool"; Priority = 50.0; Running = 1; Share = 1.0], [Name = "bob@pool"; Priority = 0.5; Running = 1; Share = 2.0] }]`,
			kinds: "busy: priority:alice@pool",
			text:  []string{"User priority for alice@pool is 50.00.", "alice@pool runs 1 jobs, its fair share of the pool at user priority 50 is 1: the other submitters (1 of them of better priority)"}},
		{name: "under its share", slots: busy, counts: [6]int{0, 0, 1, 1, 1, 0},
			neg:   `[PondSubmitterShares = { [Name = "alice@pool"; Priority = 0.5; Running = 1; Share = 2.0], [Name = "bob@pool"; Priority = 50.0; Running = 1; Share = 1.0] }]`,
			kinds: "busy:"},
		{name: "group at quota", extra: `AccountingGroup = "group_a.alice"`, slots: busy, counts: [6]int{0, 0, 1, 1, 1, 0},
			neg: `[PondGroupQuotas = { [Name = "<none>"; EffectiveQuota = 0.0; AcceptSurplus = true; WeightedResourcesUsed = 0.0],
				[Name = "group_a"; ConfigQuota = 1.0; IsStatic = true; EffectiveQuota = 1.0; AcceptSurplus = false; WeightedResourcesUsed = 1.0; Blocked = 4] }]`,
			kinds: "busy: group-quota:group_a",
			text:  []string{"The job's accounting group group_a is at its quota: it uses 1 of its quota of 1 (GROUP_QUOTA_group_a) and it accepts no surplus (GROUP_ACCEPT_SURPLUS)", "held back 4 idle jobs"}},
		{name: "group under quota", extra: `AccountingGroup = "group_a.alice"`, slots: free, counts: [6]int{0, 0, 0, 1, 0, 2},
			neg: `[PondGroupQuotas = { [Name = "<none>"; EffectiveQuota = 0.0; AcceptSurplus = true],
				[Name = "group_a"; ConfigQuota = 3.0; IsStatic = true; EffectiveQuota = 3.0; AcceptSurplus = false; WeightedResourcesUsed = 1.0] }]`},
		{name: "no slots", counts: [6]int{}, kinds: "requirements:", text: []string{"The pool has no slots"}},
		{name: "slots refuse", slots: []string{`[Name = "s"; Arch = "X86_64"; Memory = 4096; State = "Unclaimed"; Requirements = TARGET.Owner == "bob"]`},
			counts: [6]int{0, 1, 0, 0, 0, 0}, kinds: "requirements:", text: []string{"reject it by their own requirements"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			extra := c.extra
			if extra == "" {
				extra = "Iwd = \"/\""
			}
			in := analysisInput{Job: mustAd(t, fmt.Sprintf(job, c.req, extra)), Now: now}
			for _, s := range c.slots {
				in.Slots = append(in.Slots, mustAd(t, s))
			}
			if c.schedd != "" {
				in.Schedd = mustAd(t, c.schedd)
			}
			if c.neg != "" {
				in.Negotiator = mustAd(t, c.neg)
			}
			a := analyze(in)
			got := [6]int{a.RejectedByJob, a.RejectedBySlot, a.RunningYours, a.ServingOthers, a.Unavailable, a.Available}
			if got != c.counts {
				t.Errorf("counts %v; want %v", got, c.counts)
			}
			var kinds []string
			for _, b := range a.Blockers {
				kinds = append(kinds, b.Kind+":"+b.Name)
			}
			if strings.Join(kinds, " ") != c.kinds {
				t.Errorf("blockers %q; want %q: %+v", strings.Join(kinds, " "), c.kinds, a.Blockers)
			}
			var b bytes.Buffer
			a.print(&b, true)
			for _, want := range c.text {
				if !strings.Contains(b.String(), want) {
					t.Errorf("the analysis does not say %q:\n%s", want, b.String())
				}
			}
		})
	}
}

// TestAnalyzeNotIdle checks a running or held job gets no reasons to wait,
// and a held one its hold reason.
func TestAnalyzeNotIdle(t *testing.T) {
	for st, want := range map[int]string{2: "007.001:  Job is running.", 5: "Hold reason: no such file"} {
		a := analyze(analysisInput{Job: mustAd(t, fmt.Sprintf(`[ClusterId = 7; ProcId = 1; JobStatus = %d; HoldReason = "no such file"; Owner = "alice"; Requirements = Memory > 1e9]`, st)),
			Schedd: mustAd(t, `[MaxJobsRunning = 0; PondJobsStarted = 0]`)})
		var b bytes.Buffer
		a.print(&b, false)
		if len(a.Blockers) != 0 || !strings.Contains(b.String(), want) {
			t.Errorf("status %d: blockers %+v, output:\n%s", st, a.Blockers, b.String())
		}
	}
}
