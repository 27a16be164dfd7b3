package negotiator

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// ranksOf parses pre and post job ranks ("" for none).
func ranksOf(t *testing.T, pre, post string) JobRanks {
	t.Helper()
	var r JobRanks
	if pre != "" {
		r.Pre = classad.MustParseExpr(pre)
	}
	if post != "" {
		r.Post = classad.MustParseExpr(post)
	}
	return r
}

// TestJobRanksOrderMatches checks the order in which a job takes the
// slots it matches: NEGOTIATOR_PRE_JOB_RANK, then the job's Rank, then
// NEGOTIATOR_POST_JOB_RANK, each with MY the slot and TARGET the job,
// and a rank that is not a number counting as the lowest.
func TestJobRanksOrderMatches(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		slots     []string
		job       string // more of the job's ad
		jobs      int
		pre, post string
		want      string // the slots taken, in order
	}{
		{
			// The manual's example: five slots match a request for
			// three jobs, and the schedd is given slot5, slot3, slot2.
			name: "HTCondor's manual example",
			slots: []string{
				slotAd("slot1", defSlot, "Pre = 100", "JR = 1", "Post = 10"),
				slotAd("slot2", defSlot, "Pre = 100", "JR = 2", "Post = 20"),
				slotAd("slot3", defSlot, "Pre = 100", "JR = 2", "Post = 30"),
				slotAd("slot4", defSlot, "Pre = 0", "JR = 1", "Post = 40"),
				slotAd("slot5", defSlot, "Pre = 200", "JR = 1", "Post = 50"),
			},
			job: "Rank = TARGET.JR", jobs: 3, pre: "MY.Pre", post: "MY.Post",
			want: "slot5 slot3 slot2",
		},
		{
			name:  "without the ranks, job Rank then slot order",
			slots: []string{slotAd("a", defSlot, "Pre = 1"), slotAd("b", defSlot, "Pre = 2")},
			job:   "Rank = 0", jobs: 1,
			want: "a",
		},
		{
			name:  "the pre job rank overrides the job's Rank",
			slots: []string{slotAd("a", defSlot, "Pre = 1", "JR = 5"), slotAd("b", defSlot, "Pre = 2", "JR = 1")},
			job:   "Rank = TARGET.JR", jobs: 1, pre: "Pre",
			want: "b",
		},
		{
			name:  "the job's Rank overrides the post job rank",
			slots: []string{slotAd("a", defSlot, "Post = 1", "JR = 5"), slotAd("b", defSlot, "Post = 2", "JR = 1")},
			job:   "Rank = TARGET.JR", jobs: 1, post: "Post",
			want: "a",
		},
		{
			name: "MY is the slot: a bare name is the slot's",
			slots: []string{slotAd("small", "Cpus = 1\nMemory = 512\nDisk = 1000\nRequirements = true\nRank = 0"),
				slotAd("big", "Cpus = 1\nMemory = 4096\nDisk = 1000\nRequirements = true\nRank = 0")},
			job: "Memory = 1", jobs: 2, pre: "Memory",
			want: "big small",
		},
		{
			name:  "TARGET is the job",
			slots: []string{slotAd("n1", defSlot, `Machine = "n1"`), slotAd("n2", defSlot, `Machine = "n2"`)},
			job:   `Machine = "n1"` + "\nPreferred = \"n2\"", jobs: 1, pre: "MY.Machine == TARGET.Preferred",
			want: "n2",
		},
		{
			name: "undefined counts as the lowest, below any number",
			slots: []string{slotAd("undef", defSlot), slotAd("low", defSlot, "Pre = -1e30"),
				slotAd("str", defSlot, `Pre = "high"`)},
			jobs: 3, pre: "MY.Pre",
			want: "low undef str",
		},
		{
			name:  "an error counts as the lowest",
			slots: []string{slotAd("err", defSlot, "Pre = 1/\"x\""), slotAd("zero", defSlot, "Pre = 0")},
			jobs:  1, pre: "MY.Pre",
			want: "zero",
		},
		{
			name:  "a boolean counts as 1 or 0",
			slots: []string{slotAd("f", defSlot, "Gpu = false"), slotAd("t", defSlot, "Gpu = true"), slotAd("neg", defSlot, "Gpu = -1")},
			jobs:  3, post: "MY.Gpu",
			want: "t f neg",
		},
		{
			name:  "explicitly undefined has no effect",
			slots: []string{slotAd("a", defSlot, "JR = 1"), slotAd("b", defSlot, "JR = 2")},
			job:   "Rank = TARGET.JR", jobs: 2, pre: "UNDEFINED", post: "UNDEFINED",
			want: "b a",
		},
		{
			name: "HTCondor's default pre job rank: the machine's Rank, then best fit",
			slots: []string{
				slotAd("big", "Cpus = 4\nMemory = 4096\nDisk = 1000\nRequirements = true\nRank = 0\nSlotID = 1"),
				slotAd("small", "Cpus = 1\nMemory = 1024\nDisk = 1000\nRequirements = true\nRank = 0\nSlotID = 2"),
				slotAd("smallmem", "Cpus = 1\nMemory = 512\nDisk = 1000\nRequirements = true\nRank = 0\nSlotID = 3"),
				slotAd("liked", "Cpus = 4\nMemory = 4096\nDisk = 1000\nRequirements = true\nRank = 1\nSlotID = 4"),
			},
			job: "Rank = TARGET.Memory", jobs: 4, pre: DefaultPreJobRank, post: DefaultPostJobRank,
			want: "liked smallmem small big",
		},
		{
			name: "HTCondor's default post job rank: faster, then the lower SlotID, never offline first",
			slots: []string{
				slotAd("s3", defSlot, "SlotID = 3"), slotAd("s1", defSlot, "SlotID = 1"),
				slotAd("off", defSlot, "SlotID = 0", "Offline = true"), slotAd("fast", defSlot, "SlotID = 9", "KFlops = 5000"),
			},
			jobs: 4, pre: DefaultPreJobRank, post: DefaultPostJobRank,
			want: "fast s1 s3 off",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var jobs []string
			for range tc.jobs {
				jobs = append(jobs, "Owner = \"u\"\nRequestCpus = 1\nRequestMemory = 1\nRequestDisk = 1\nRequirements = true\n"+tc.job)
			}
			p := pool{slots: tc.slots, subs: []poolSub{{name: "u", prio: 1, jobs: jobs}}}
			ranks := ranksOf(t, tc.pre, tc.post)
			slots, subs := p.build(t)
			var got []string
			for _, m := range MatchmakeRanked(slots, subs, ranks) {
				got = append(got, m.Slot.Name)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("slots taken %q; want %q", g, tc.want)
			}
			slots, subs = p.build(t)
			var ref []string
			for _, m := range referenceMatchmakeRanked(slots, subs, ranks) {
				ref = append(ref, m.Slot.Name)
			}
			if r := strings.Join(ref, " "); r != tc.want {
				t.Errorf("the reference takes %q; want %q", r, tc.want)
			}
		})
	}
}

// TestJobRanksSplitAutoclusters checks that jobs differing only in an
// attribute the pool's ranks read are ranked each on its own.
func TestJobRanksSplitAutoclusters(t *testing.T) {
	t.Parallel()
	p := pool{
		slots: []string{slotAd("n1", defSlot, `Machine = "n1"`), slotAd("n2", defSlot, `Machine = "n2"`),
			slotAd("n3", defSlot, `Machine = "n3"`)},
		subs: []poolSub{{name: "u", prio: 1, jobs: []string{
			"Owner = \"u\"\nRequestCpus = 1\nRequirements = true\nWant = \"n2\"",
			"Owner = \"u\"\nRequestCpus = 1\nRequirements = true\nWant = \"n3\"",
		}}},
	}
	slots, subs := p.build(t)
	got := strings.Join(render(MatchmakeRanked(slots, subs, ranksOf(t, "MY.Machine == TARGET.Want", ""))), " ")
	if got != "u.0->n2 u.1->n3" {
		t.Fatalf("matches %q; want each job on the machine it names", got)
	}
}

// TestMatchmakeRankedEquivalentRandom compares MatchmakeRanked with the
// reference on random pools, with HTCondor's default ranks and with
// ranks that read both ads.
func TestMatchmakeRankedEquivalentRandom(t *testing.T) {
	n := 120
	if testing.Short() {
		n = 30
	}
	rankSets := [][2]string{
		{DefaultPreJobRank, DefaultPostJobRank},
		{"TARGET.Prio * MY.Cpus", "MY.KeyboardIdle"},
		{"", "ifThenElse(MY.Arch == \"X86_64\", 1, TARGET.RequestMemory)"},
		{"MY.FileSystemDomain == TARGET.FileSystemDomain", ""},
	}
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 9))
		p := randomPool(r)
		rs := rankSets[seed%len(rankSets)]
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			ranks := ranksOf(t, rs[0], rs[1])
			slots, subs := p.build(t)
			got := render(MatchmakeRanked(slots, subs, ranks))
			slots, subs = p.build(t)
			want := render(referenceMatchmakeRanked(slots, subs, ranks))
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("MatchmakeRanked and the reference differ\n got: %v\nwant: %v", got, want)
			}
		})
	}
}

func TestReadJobRanks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		set       map[string]string
		pre, post string // the expressions read; "" for none
		err       string
	}{
		{name: "HTCondor's defaults", pre: DefaultPreJobRank, post: DefaultPostJobRank},
		{name: "set", set: map[string]string{"NEGOTIATOR_PRE_JOB_RANK": "MY.Memory", "NEGOTIATOR_POST_JOB_RANK": "0 - SlotID"},
			pre: "MY.Memory", post: "0 - SlotID"},
		{name: "set to nothing: none", set: map[string]string{"NEGOTIATOR_PRE_JOB_RANK": "", "NEGOTIATOR_POST_JOB_RANK": " "}},
		{name: "a bad pre job rank", set: map[string]string{"NEGOTIATOR_PRE_JOB_RANK": "Memory >"}, err: "NEGOTIATOR_PRE_JOB_RANK"},
		{name: "a bad post job rank", set: map[string]string{"NEGOTIATOR_POST_JOB_RANK": "(KFlops"}, err: "NEGOTIATOR_POST_JOB_RANK"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.New(config.Options{})
			for k, v := range tc.set {
				cfg.Set(k, v)
			}
			r, err := ReadJobRanks(cfg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v; want one naming %s", err, tc.err)
				}
				// The negotiator refuses it too.
				if _, err := New(Options{Config: cfg}); err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("New: err = %v; want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				got  classad.Expr
				want string
			}{{r.Pre, tc.pre}, {r.Post, tc.post}} {
				switch {
				case c.want == "" && c.got != nil:
					t.Errorf("read %s; want none", c.got)
				case c.want != "" && (c.got == nil || c.got.String() != classad.MustParseExpr(c.want).String()):
					t.Errorf("read %v; want %s", c.got, c.want)
				}
			}
		})
	}
}

// TestJobRanksOrderPreemption checks that the pool's job ranks order the
// claimed slots a job may preempt before the reason and PREEMPTION_RANK.
func TestJobRanksOrderPreemption(t *testing.T) {
	t.Parallel()
	job := Job{ID: "1.0", Ad: mustAd(t, "Owner = \"u@x\"\nRequestCpus = 1\nRequirements = true\nRank = 0\nWanted = true")}
	sub := Submitter{Name: "u@x", Schedd: "schedd:1", Priority: 500, Jobs: []Job{job}}
	prio := func(string) float64 { return 500 }
	cases := []struct {
		name      string
		pre, post string
		want      string
	}{
		{name: "PREEMPTION_RANK alone", want: "a"},
		{name: "the pre job rank first", pre: "MY.Pre", want: "b"},
		{name: "the post job rank before PREEMPTION_RANK", post: "MY.Pre", want: "b"},
		{name: "an undefined pre job rank is the lowest", pre: "MY.Missing * MY.Pre", want: "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Both run jobs their machines rank below this one (rank
			// preemption); PREEMPTION_RANK prefers a.
			slots := []*Slot{claimedSlot(t, "a", "v@x", 0, "TARGET.Wanted", "Pre = 1\nPR = 10"),
				claimedSlot(t, "b", "v@x", 0, "TARGET.Wanted", "Pre = 2\nPR = 1")}
			pol := PreemptPolicy{Consider: true, Rank: classad.MustParseExpr("MY.PR"), Ranks: ranksOf(t, tc.pre, tc.post)}
			got := Preempt(nil, slots, []Submitter{sub}, prio, nil, 2, pol)
			if len(got) != 1 || got[0].Slot.Name != tc.want {
				t.Fatalf("preemptions %v; want the job on %s", render(got), tc.want)
			}
		})
	}
}
