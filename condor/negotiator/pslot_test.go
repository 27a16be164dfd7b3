package negotiator

import (
	"sort"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// pslotAd is a partitionable slot slot1@h with cpus free and the machine
// Rank rank.
func pslotAd(t *testing.T, cpus int, rank string) *Slot {
	src := "Name = \"slot1@h\"\nMachine = \"h\"\nSlotID = 1\nState = \"Unclaimed\"\nPartitionableSlot = true\n" +
		"SlotType = \"Partitionable\"\nCpus = " + classad.Int(int64(cpus)).String() +
		"\nMemory = 4096\nDisk = 1000000\nRequirements = true\nRank = " + rank + "\n"
	return NewSlot(mustAd(t, src), "startd:1", "pslot-claim")
}

// dslotAd is a dynamic slot of slot1@h with one cpu, running a job of user
// that the machine ranks cur; extra is more of its ad.
func dslotAd(t *testing.T, name, user string, cur float64, rank, extra string) *Slot {
	src := "Name = \"" + name + "\"\nMachine = \"h\"\nSlotID = 1\nState = \"Claimed\"\nDynamicSlot = true\n" +
		"SlotType = \"Dynamic\"\nCpus = 1\nMemory = 1024\nDisk = 100000\nRequirements = true\n" +
		"RemoteUser = \"" + user + "\"\nCurrentRank = " + classad.Real(cur).String() + "\nRank = " + rank + "\n" + extra
	return NewSlot(mustAd(t, src), "startd:1", "preempt-"+name)
}

// TestPslotPreemption checks ALLOW_PSLOT_PREEMPTION as the negotiator's
// cycle applies it: the free slots are matched first, then what is left
// may preempt, a partitionable slot's dynamic slots together.
func TestPslotPreemption(t *testing.T) {
	t.Parallel()
	prios := map[string]float64{"low@x": 5000, "high@x": 500}
	prio := func(u string) float64 {
		if p, ok := prios[u]; ok {
			return p
		}
		return 500
	}
	job := func(id string, cpus int) Job {
		return Job{ID: id, Ad: mustAd(t, "Owner = \"high\"\nUser = \"high@x\"\nRequestCpus = "+classad.Int(int64(cpus)).String()+
			"\nRequestMemory = 100\nRequirements = true\nRank = 0\nPondLocal = true\n")}
	}
	yes := classad.MustParseExpr("true")
	on := PreemptPolicy{Consider: true, Requirements: yes, Pslot: true}
	off := PreemptPolicy{Consider: true, Requirements: yes}
	low := func(name string) *Slot { return dslotAd(t, name, "low@x", 0, "0", "") }
	cases := []struct {
		name    string
		free    int // the partitionable slot's free cpus
		kids    []*Slot
		jobs    []Job
		pol     PreemptPolicy
		slot    string   // the slot the job is matched to ("" none)
		victims []string // the dynamic slots it preempts
		preempt bool
	}{
		{name: "the job fits the free cpus: no preemption", free: 2, kids: []*Slot{low("slot1_1@h"), low("slot1_2@h")},
			jobs: []Job{job("1.0", 2)}, pol: on, slot: "slot1@h"},
		{name: "one dynamic slot preempted with the free cpu", free: 1, kids: []*Slot{low("slot1_1@h"), low("slot1_2@h")},
			jobs: []Job{job("1.0", 2)}, pol: on, slot: "slot1@h", victims: []string{"slot1_1@h"}, preempt: true},
		{name: "two dynamic slots preempted at once", kids: []*Slot{low("slot1_1@h"), low("slot1_2@h")},
			jobs: []Job{job("1.0", 2)}, pol: on, slot: "slot1@h", victims: []string{"slot1_1@h", "slot1_2@h"}, preempt: true},
		{name: "the lowest CurrentRank is preempted first", kids: []*Slot{
			dslotAd(t, "slot1_1@h", "low@x", 5, "ifThenElse(TARGET.PondLocal =?= true, 10, 0)", ""),
			dslotAd(t, "slot1_2@h", "low@x", 1, "ifThenElse(TARGET.PondLocal =?= true, 10, 0)", ""),
			dslotAd(t, "slot1_3@h", "low@x", 3, "ifThenElse(TARGET.PondLocal =?= true, 10, 0)", "")},
			jobs: []Job{job("1.0", 2)}, pol: on, slot: "slot1@h", victims: []string{"slot1_2@h", "slot1_3@h"}, preempt: true},
		{name: "a dynamic slot whose job has retirement time left is skipped", kids: []*Slot{
			dslotAd(t, "slot1_1@h", "low@x", 0, "0", "RetirementTimeRemaining = 600"), low("slot1_2@h"), low("slot1_3@h")},
			jobs: []Job{job("1.0", 2)}, pol: on, slot: "slot1@h", victims: []string{"slot1_2@h", "slot1_3@h"}, preempt: true},
		{name: "not enough without the retiring ones: nothing preempted", kids: []*Slot{
			dslotAd(t, "slot1_1@h", "low@x", 0, "0", "RetirementTimeRemaining = 600"), low("slot1_2@h")},
			jobs: []Job{job("1.0", 2)}, pol: on},
		{name: "a dynamic slot the job may not preempt (a better priority's) is skipped", kids: []*Slot{
			dslotAd(t, "slot1_1@h", "high@x", 0, "0", ""), low("slot1_2@h")},
			jobs: []Job{job("1.0", 2)}, pol: on},
		{name: "with pslot preemption a dynamic slot is not preempted alone", kids: []*Slot{low("slot1_1@h")},
			jobs: []Job{job("1.0", 1)}, pol: on, slot: "slot1@h", victims: []string{"slot1_1@h"}, preempt: true},
		{name: "knob off: a job larger than each dynamic slot preempts nothing", kids: []*Slot{low("slot1_1@h"), low("slot1_2@h")},
			jobs: []Job{job("1.0", 2)}, pol: off},
		{name: "knob off: dynamic slots are preempted one by one", kids: []*Slot{low("slot1_1@h"), low("slot1_2@h")},
			jobs: []Job{job("1.0", 1)}, pol: off, slot: "slot1_1@h", preempt: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			free := []*Slot{pslotAd(t, tc.free, "0")}
			subs := []Submitter{{Name: "high@x", Schedd: "schedd:1", Priority: prio("high@x"), Jobs: tc.jobs}}
			got := cycle(free, tc.kids, subs, prio, tc.pol)
			if tc.slot == "" {
				if len(got) != 0 {
					t.Fatalf("matched %s to %s; want nothing", got[0].Job.ID, got[0].Slot.Name)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d matches; want 1", len(got))
			}
			m := got[0]
			var names []string
			for _, v := range m.Victims {
				names = append(names, v.Name)
			}
			sort.Strings(names)
			if m.Slot.Name != tc.slot || m.Preempt != tc.preempt || strings.Join(names, ",") != strings.Join(tc.victims, ",") {
				t.Fatalf("matched to %s (preempt %v) preempting [%s]; want %s (preempt %v) preempting [%s]", m.Slot.Name,
					m.Preempt, strings.Join(names, ","), tc.slot, tc.preempt, strings.Join(tc.victims, ","))
			}
			w := m.Wire()
			if len(w.Preempts) != len(tc.victims) {
				t.Fatalf("the wire match names %d preempted slots; want %d", len(w.Preempts), len(tc.victims))
			}
			for _, p := range w.Preempts {
				if p.ClaimID != "preempt-"+p.SlotName {
					t.Errorf("preempted slot %s with claim id %q; want its preempting claim id", p.SlotName, p.ClaimID)
				}
			}
		})
	}
}

// cycle matches the submitters' jobs to the free slots, then those left
// to the claimed ones, as a negotiation cycle does.
func cycle(free, claimed []*Slot, subs []Submitter, prio func(string) float64, pol PreemptPolicy) []Match {
	ms := Matchmake(free, subs)
	taken := map[string]bool{}
	matched := map[string]int{}
	for _, m := range ms {
		taken[m.Job.ID] = true
		matched[m.Submitter]++
	}
	var left []Submitter
	for _, s := range subs {
		var jobs []Job
		for _, j := range s.Jobs {
			if !taken[j.ID] {
				jobs = append(jobs, j)
			}
		}
		s.Jobs = jobs
		left = append(left, s)
	}
	return append(ms, Preempt(free, claimed, left, prio, matched, 8, pol)...)
}

func TestReadPslotPreemption(t *testing.T) {
	t.Parallel()
	cfg := config.New(config.Options{})
	p, err := ReadPreemptPolicy(cfg)
	if err != nil || p.Pslot {
		t.Fatalf("ALLOW_PSLOT_PREEMPTION defaults to %v (%v); want False", p.Pslot, err)
	}
	cfg.Set("ALLOW_PSLOT_PREEMPTION", "true")
	if p, err = ReadPreemptPolicy(cfg); err != nil || !p.Pslot {
		t.Fatalf("ALLOW_PSLOT_PREEMPTION = true reads as %v (%v)", p.Pslot, err)
	}
	cfg.Set("ALLOW_PSLOT_PREEMPTION", "maybe")
	if _, err = ReadPreemptPolicy(cfg); err == nil || !strings.Contains(err.Error(), "ALLOW_PSLOT_PREEMPTION") {
		t.Fatalf("a bad ALLOW_PSLOT_PREEMPTION: %v; want an error naming it", err)
	}
}
