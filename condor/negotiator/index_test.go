package negotiator

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
)

// referenceMatchmake is the straightforward matcher Matchmake must agree
// with: the same fair share over the same autoclusters, but every job
// tested against every slot with classad.Match and ranked with
// classad.Rank, the best by job Rank, then machine Rank, then slot order.
func referenceMatchmake(slots []*Slot, subs []Submitter) []Match {
	return referenceMatchmakeRanked(slots, subs, JobRanks{})
}

// referenceMatchmakeRanked is referenceMatchmake with the negotiator's
// pre and post job ranks evaluated for every job and slot.
func referenceMatchmakeRanked(slots []*Slot, subs []Submitter, ranks JobRanks) []Match {
	attrs := SlotAttrs(slots)
	ranks.attrs(attrs)
	ms, _ := fairShare(slots, subs, attrs, nil, func(ac *autocluster) *Slot {
		job := ac.jobs[ac.next]
		best := cand{slot: -1}
		for i, s := range slots {
			if !ac.fits(s) || !classad.Match(job.Ad, s.Ad) {
				continue
			}
			c := cand{jrank: rankValue(classad.Rank(job.Ad, s.Ad)), mrank: rankValue(classad.Rank(s.Ad, job.Ad)), slot: i}
			c.pre, c.post = ranks.eval(s.Ad, job.Ad)
			if best.slot < 0 || c.better(best) {
				best = c
			}
		}
		if best.slot < 0 {
			return nil
		}
		return slots[best.slot]
	}, nil)
	return ms
}

// pool is a test pool: slot and job ads in old ClassAd syntax.
type pool struct {
	slots []string
	subs  []poolSub
}

type poolSub struct {
	name string
	prio float64
	jobs []string
}

func (p pool) build(t testing.TB) ([]*Slot, []Submitter) {
	t.Helper()
	slots := make([]*Slot, len(p.slots))
	for i, src := range p.slots {
		ad, err := classad.ParseOldAd(src)
		if err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
		slots[i] = NewSlot(ad, "127.0.0.1:1", fmt.Sprint("claim", i))
	}
	var subs []Submitter
	for _, ps := range p.subs {
		sub := Submitter{Name: ps.name, Schedd: "127.0.0.1:2", Priority: ps.prio}
		for j, src := range ps.jobs {
			ad, err := classad.ParseOldAd(src)
			if err != nil {
				t.Fatalf("job %s/%d: %v", ps.name, j, err)
			}
			sub.Jobs = append(sub.Jobs, Job{ID: fmt.Sprintf("%s.%d", ps.name, j), Ad: ad})
		}
		subs = append(subs, sub)
	}
	return slots, subs
}

func render(ms []Match) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Job.ID + "->" + m.Slot.Name
	}
	return out
}

// checkEquivalent runs Matchmake and the reference on fresh copies of the
// pool and compares the matches, in order.
func checkEquivalent(t *testing.T, p pool) []string {
	t.Helper()
	slots, subs := p.build(t)
	got := render(Matchmake(slots, subs))
	slots, subs = p.build(t)
	want := render(referenceMatchmake(slots, subs))
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Matchmake and the reference differ\n got: %v\nwant: %v", got, want)
	}
	return got
}

func slotAd(name string, attrs ...string) string {
	return fmt.Sprintf("Name = %q\n%s\n", name, strings.Join(attrs, "\n"))
}

const (
	defSlot = "Cpus = 1\nMemory = 1024\nDisk = 1000\nStart = true\nRequirements = START\nRank = 0"
)

func TestMatchmakeEquivalentCases(t *testing.T) {
	job := func(lines ...string) string {
		return "RequestCpus = 1\nRequestMemory = 100\nRequestDisk = 10\n" + strings.Join(lines, "\n")
	}
	cases := []struct {
		name string
		pool pool
		want []string
	}{
		{
			name: "ties go to the earlier slot",
			pool: pool{slots: []string{slotAd("a", defSlot, `FileSystemDomain = "x"`), slotAd("b", defSlot, `FileSystemDomain = "y"`),
				slotAd("c", defSlot, `FileSystemDomain = "x"`)},
				subs: []poolSub{{name: "u", prio: 1, jobs: []string{job("Requirements = true"), job("Requirements = true"), job("Requirements = true")}}}},
			want: []string{"u.0->a", "u.1->b", "u.2->c"},
		},
		{
			name: "job rank then machine rank",
			pool: pool{slots: []string{
				slotAd("small", "Cpus = 1\nMemory = 512\nDisk = 1000\nRequirements = true\nRank = 5"),
				slotAd("big-low", "Cpus = 1\nMemory = 2048\nDisk = 1000\nRequirements = true\nRank = 1"),
				slotAd("big-high", "Cpus = 1\nMemory = 2048\nDisk = 1000\nRequirements = true\nRank = TARGET.RequestMemory"),
			},
				subs: []poolSub{{name: "u", prio: 1, jobs: []string{job("Requirements = true", "Rank = TARGET.Memory"),
					job("Requirements = true", "Rank = TARGET.Memory"), job("Requirements = true", "Rank = TARGET.Memory")}}}},
			want: []string{"u.0->big-high", "u.1->big-low", "u.2->small"},
		},
		{
			name: "per-host file system domains with file transfer",
			pool: pool{slots: []string{
				slotAd("h1", defSlot, `FileSystemDomain = "h1"`, "HasFileTransfer = false"),
				slotAd("h2", defSlot, `FileSystemDomain = "h2"`, "HasFileTransfer = true"),
				slotAd("sub", defSlot, `FileSystemDomain = "submit"`, "HasFileTransfer = false"),
			},
				subs: []poolSub{{name: "u", prio: 1, jobs: []string{
					job(`FileSystemDomain = "submit"`, "Requirements = (TARGET.FileSystemDomain == MY.FileSystemDomain) || TARGET.HasFileTransfer"),
					job(`FileSystemDomain = "submit"`, "Requirements = (TARGET.FileSystemDomain == MY.FileSystemDomain) || TARGET.HasFileTransfer"),
					job(`FileSystemDomain = "submit"`, "Requirements = (TARGET.FileSystemDomain == MY.FileSystemDomain) || TARGET.HasFileTransfer"),
				}}}},
			want: []string{"u.0->h2", "u.1->sub"},
		},
		{
			name: "slot START reads a job attribute through an indirection",
			pool: pool{slots: []string{
				slotAd("a", "Cpus = 1\nMemory = 1024\nDisk = 1000\nStart = Allowed\nAllowed = TARGET.Owner == \"bob\"\nRequirements = START"),
				slotAd("b", "Cpus = 1\nMemory = 1024\nDisk = 1000\nStart = Allowed\nAllowed = true\nRequirements = START"),
			},
				subs: []poolSub{
					{name: "alice", prio: 1, jobs: []string{job(`Owner = "alice"`, "Requirements = true"), job(`Owner = "alice"`, "Requirements = true")}},
					{name: "bob", prio: 2, jobs: []string{job(`Owner = "bob"`, "Requirements = true")}},
				}},
			want: []string{"alice.0->b", "bob.0->a"},
		},
		{
			name: "a job attribute read through the job's own expressions",
			pool: pool{slots: []string{
				slotAd("one", defSlot, "Cpus = 1"), slotAd("four", "Cpus = 4\nMemory = 1024\nDisk = 1000\nRequirements = true"),
			},
				subs: []poolSub{{name: "u", prio: 1, jobs: []string{job("Wide = TARGET.Cpus >= 4", "Requirements = MY.Wide")}}}},
			want: []string{"u.0->four"},
		},
		{
			name: "eval() reads attributes it does not name",
			pool: pool{slots: []string{
				slotAd("a", defSlot, `Kind = "gpu"`, `Which = "Kind"`), slotAd("b", defSlot, `Kind = "cpu"`, `Which = "Kind"`),
			},
				subs: []poolSub{{name: "u", prio: 1, jobs: []string{job(`Requirements = eval(TARGET.Which) == "cpu"`)}}}},
			want: []string{"u.0->b"},
		},
		{
			name: "no Requirements matches nothing",
			pool: pool{slots: []string{slotAd("a", "Cpus = 1\nMemory = 1024\nDisk = 1000"), slotAd("b", defSlot)},
				subs: []poolSub{{name: "u", prio: 1, jobs: []string{job(), job("Requirements = true")}}}},
			want: []string{"u.1->b"},
		},
		{
			name: "a partitionable slot is shared until its resources run out",
			pool: pool{slots: []string{
				slotAd("p", "Cpus = 2\nMemory = 250\nDisk = 1000\nPartitionableSlot = true\nRequirements = true"),
				slotAd("s", defSlot),
			},
				subs: []poolSub{{name: "u", prio: 1, jobs: []string{job("Requirements = true"), job("Requirements = true"), job("Requirements = true")}}}},
			want: []string{"u.0->p", "u.1->p", "u.2->s"},
		},
		{
			name: "undefined conjunct fails the match",
			pool: pool{slots: []string{slotAd("a", defSlot), slotAd("b", defSlot, "HasGPU = true")},
				subs: []poolSub{{name: "u", prio: 1, jobs: []string{job("Requirements = TARGET.Memory > 0 && TARGET.HasGPU")}}}},
			want: []string{"u.0->b"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := checkEquivalent(t, tc.pool)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("matches %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMatchmakeEquivalentRandom compares Matchmake with the reference on
// random pools whose slots and jobs mix the constructs that decide how
// evaluations are shared: per-slot attributes, indirections in either ad,
// bare names resolved in the other ad, eval(), ranks of every kind, missing
// Requirements and partitionable slots.
func TestMatchmakeEquivalentRandom(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 40
	}
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 5))
		p := randomPool(r)
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { checkEquivalent(t, p) })
	}
}

// TestMatchmakeEquivalentLargePool compares Matchmake with the reference
// on a pool large enough for the index to spread its work over the CPUs,
// with every slot in its own file system domain.
func TestMatchmakeEquivalentLargePool(t *testing.T) {
	run := func(f func([]*Slot, []Submitter) []Match) []string {
		slots, subs := benchPool(t, 3000, 24, 3, false)
		return render(f(slots, subs))
	}
	got, want := run(Matchmake), run(referenceMatchmake)
	if len(got) != 72 || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Matchmake and the reference differ\n got: %v\nwant: %v", got, want)
	}
}

func randomPool(r *rand.Rand) pool {
	pick := func(opts ...string) string { return opts[r.IntN(len(opts))] }
	var p pool
	nSlots := 5 + r.IntN(40)
	for i := range nSlots {
		lines := []string{
			fmt.Sprintf("Cpus = %d", 1+r.IntN(4)),
			fmt.Sprintf("Memory = %d", 256*(1+r.IntN(4))),
			"Disk = 10000",
			"Arch = " + pick(`"X86_64"`, `"aarch64"`),
			"FileSystemDomain = " + pick(fmt.Sprintf("%q", fmt.Sprint("host", i)), `"shared"`, `"submit"`),
			pick("HasFileTransfer = true", "HasFileTransfer = false", ""),
			pick("KeyboardIdle = 10", "KeyboardIdle = 1000", ""),
			"Start = " + pick("true", "KeyboardIdle > 100", `TARGET.Owner != "u2"`, "Owner =!= \"u1\"", "Gate", "RequestCpus <= 2"),
			"Gate = " + pick("true", "TARGET.RequestMemory < 600", "MY.Cpus > 1"),
			pick("Requirements = START && TARGET.RequestMemory <= MY.Memory", "Requirements = START", "Requirements = START && MY.Cpus >= TARGET.RequestCpus", ""),
			"Rank = " + pick("0", "0", "TARGET.RequestMemory", "KeyboardIdle", "TARGET.Prio", "1.5"),
			pick("PartitionableSlot = false", "PartitionableSlot = false", "PartitionableSlot = true"),
		}
		p.slots = append(p.slots, slotAd(fmt.Sprint("slot", i), lines...))
	}
	nSubs := 1 + r.IntN(4)
	for u := range nSubs {
		ps := poolSub{name: fmt.Sprint("u", u), prio: float64(1 + r.IntN(3))}
		nClusters := 1 + r.IntN(5)
		for range nClusters {
			var conj []string
			for range 1 + r.IntN(4) {
				conj = append(conj, pick(`(TARGET.Arch == "X86_64")`, "TARGET.Memory >= RequestMemory",
					"(TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer)",
					"TARGET.KeyboardIdle > 50", "TARGET.Cpus >= RequestCpus", "Wide", `eval("TARGET.Cpus") > 1`,
					"TARGET.HasFileTransfer =?= true", "(TARGET.Memory * 2 > RequestMemory && TARGET.Cpus > 0)"))
			}
			lines := []string{
				fmt.Sprintf("Owner = %q", ps.name),
				fmt.Sprintf("RequestCpus = %d", 1+r.IntN(2)),
				fmt.Sprintf("RequestMemory = %d", 128*(1+r.IntN(6))),
				"RequestDisk = 10",
				`FileSystemDomain = "submit"`,
				fmt.Sprintf("Prio = %d", r.IntN(3)),
				"Wide = " + pick("TARGET.Cpus >= 2", "true", "RequestCpus > 1"),
				pick("Requirements = "+strings.Join(conj, " && "), "Requirements = "+strings.Join(conj, " && "), ""),
				pick("Rank = 0", "Rank = TARGET.Memory", "Rank = TARGET.Cpus * 2", "Rank = TARGET.KeyboardIdle", "", "Rank = TARGET.Memory / 0.0"),
			}
			src := strings.Join(lines, "\n")
			for range 1 + r.IntN(4) {
				ps.jobs = append(ps.jobs, src)
			}
		}
		p.subs = append(p.subs, ps)
	}
	return p
}
