package factory

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/negotiator"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
)

// testOffers are four EC2 instance types with their shapes and
// on-demand prices (us-east-1), not in price order.
func testOffers() []offer {
	return []offer{
		{Offer: glidein.Offer{Name: "r5.large", CPUs: 2, MemoryMB: 16384, Known: true}, price: 0.126, priced: true},
		{Offer: glidein.Offer{Name: "g4dn.xlarge", CPUs: 4, MemoryMB: 16384, GPUs: 1, Known: true}, price: 0.526, priced: true},
		{Offer: glidein.Offer{Name: "t3.small", CPUs: 2, MemoryMB: 2048, Known: true}, price: 0.0208, priced: true},
		{Offer: glidein.Offer{Name: "c7i.large", CPUs: 2, MemoryMB: 4096, Known: true}, price: 0.08925, priced: true},
	}
}

// testJobs makes one submitter's idle jobs, each "CPUS/MEMORY_MB" or
// "CPUS/MEMORY_MB/GPUS".
func testJobs(t *testing.T, specs ...string) []negotiator.Submitter {
	t.Helper()
	sub := negotiator.Submitter{Name: "alice@pond", Schedd: "127.0.0.1:2"}
	for i, spec := range specs {
		var cpus, mem, gpus int
		if _, err := fmt.Sscanf(strings.ReplaceAll(spec, "/", " "), "%d %d %d", &cpus, &mem, &gpus); err != nil && strings.Count(spec, "/") == 2 {
			t.Fatal(err)
		}
		ad, err := classad.ParseOldAd(fmt.Sprintf(`MyType = "Job"
Owner = "alice"
ClusterId = 1
ProcId = %d
RequestCpus = %d
RequestMemory = %d
RequestGpus = %d
RequestDisk = 1024
Requirements = (TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) && (TARGET.Gpus >= RequestGpus) && TARGET.HasFileTransfer
`, i, cpus, mem, gpus))
		if err != nil {
			t.Fatal(err)
		}
		sub.Jobs = append(sub.Jobs, negotiator.Job{ID: fmt.Sprintf("1.%d", i), Ad: ad})
	}
	return []negotiator.Submitter{sub}
}

// offerFactory returns a factory and the state of its entry "cloud",
// whose site has testOffers, with the limits given.
func offerFactory(l api.FactoryLimits) (*Factory, *entryState) {
	st := &entryState{e: api.FactoryEntrySpec{Name: "cloud", Template: api.FactoryTemplate{CPUs: 1, MemoryMB: 512, Lifetime: api.Duration(time.Hour)}, Limits: l}}
	st.offers = testOffers()
	slices.SortStableFunc(st.offers, func(a, b offer) int {
		switch {
		case a.price < b.price:
			return -1
		case a.price > b.price:
			return 1
		}
		return 0
	})
	f := &Factory{opts: Options{Now: time.Now}, log: slog.New(slog.DiscardHandler), entries: map[string]*entryState{"cloud": st}, records: map[string]*Record{}}
	return f, st
}

// TestOfferChoice checks the instance type the factory starts for idle
// jobs: the cheapest whose glidein's ad the jobs match, none for jobs
// that ask more than any type has, and none for jobs an idle glidein
// already runs.
func TestOfferChoice(t *testing.T) {
	for _, tc := range []struct {
		name string
		jobs []string
		idle [][]string // the offers of idle glideins
		want []string
	}{
		{"small job, cheapest type", []string{"1/1000"}, nil, []string{"t3.small"}},
		{"more memory than t3.small", []string{"1/3000"}, nil, []string{"c7i.large"}},
		{"memory only r5 has", []string{"1/10000"}, nil, []string{"r5.large"}},
		{"a GPU", []string{"1/1000/1"}, nil, []string{"g4dn.xlarge"}},
		{"more cpus than the 2-vCPU types", []string{"3/1000"}, nil, []string{"g4dn.xlarge"}},
		{"more memory than any type", []string{"1/32000"}, nil, nil},
		{"more cpus than any type", []string{"8/1000"}, nil, nil},
		{"two small jobs share one t3.small", []string{"1/1000", "1/1000"}, nil, []string{"t3.small"}},
		{"a small and a big job", []string{"1/1000", "1/3000"}, nil, []string{"t3.small", "c7i.large"}},
		{"an idle c7i.large runs it", []string{"1/3000"}, [][]string{{"c7i.large"}}, nil},
		{"an idle t3.small does not fit it", []string{"1/3000"}, [][]string{{"t3.small"}}, []string{"c7i.large"}},
		{"no jobs", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, st := offerFactory(api.FactoryLimits{MaxQueued: 10, MaxRunning: 10, Ramp: api.RampNone})
			v := &view{st: st, ok: true, idle: len(tc.idle), queued: len(tc.idle), idleOffers: tc.idle}
			f.demand([]*view{v}, testJobs(t, tc.jobs...), nil)
			if !slices.Equal(v.wants, tc.want) {
				t.Fatalf("wants %q, want %q", v.wants, tc.want)
			}
			f.plan([]*view{v}, time.Now())
			if v.submit != len(tc.want) {
				t.Fatalf("%d submissions, want %d", v.submit, len(tc.want))
			}
			for i, p := range v.plans {
				if p[0] != tc.want[i] {
					t.Errorf("submission %d starts on %q, want %s first", i, p, tc.want[i])
				}
			}
		})
	}
}

// TestOfferFallbacks checks the types a launch falls back to when EC2 has
// no capacity for the chosen one: those with at least as much of
// everything, cheapest first, within what the budget leaves.
func TestOfferFallbacks(t *testing.T) {
	_, st := offerFactory(api.FactoryLimits{})
	for _, tc := range []struct {
		chosen string
		budget float64
		want   []string
	}{
		{"t3.small", -1, []string{"t3.small", "c7i.large", "r5.large", "g4dn.xlarge"}},
		{"c7i.large", -1, []string{"c7i.large", "r5.large", "g4dn.xlarge"}},
		{"r5.large", -1, []string{"r5.large", "g4dn.xlarge"}},
		{"g4dn.xlarge", -1, []string{"g4dn.xlarge"}},
		{"t3.small", 0.13, []string{"t3.small", "c7i.large", "r5.large"}},
		{"t3.small", 0.05, []string{"t3.small"}},
	} {
		if got := st.fallbacks(tc.chosen, tc.budget); !slices.Equal(got, tc.want) {
			t.Errorf("fallbacks(%s, %v) = %q, want %q", tc.chosen, tc.budget, got, tc.want)
		}
	}
}

// TestBudgetCaps checks that max_instances and max_hourly_cost stop the
// submissions that would go over them, counting the glideins the entry
// has, and that the entry says which cap stopped them.
func TestBudgetCaps(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits api.FactoryLimits
		jobs   []string
		live   [][]string // offers of glideins running
		submit int
		capped string
	}{
		{"no cap", api.FactoryLimits{}, []string{"1/3000", "1/3000", "1/3000"}, nil, 3, ""},
		{"max_instances", api.FactoryLimits{MaxInstances: 2}, []string{"1/3000", "1/3000", "1/3000"}, nil, 2, "max_instances 2"},
		{"max_instances counts the running", api.FactoryLimits{MaxInstances: 2}, []string{"1/3000", "1/3000"}, [][]string{{"r5.large"}, {"t3.small"}}, 0, "max_instances 2: 2 glideins"},
		// Each c7i.large may fall back to an r5.large: it counts at $0.126/h.
		{"max_hourly_cost", api.FactoryLimits{MaxHourlyCost: 0.3}, []string{"1/3000", "1/3000", "1/3000"}, nil, 2, "max_hourly_cost $0.3000/h: 2 glideins may cost $0.2520/h, and c7i.large"},
		{"max_hourly_cost counts the running", api.FactoryLimits{MaxHourlyCost: 0.2}, []string{"1/3000"}, [][]string{{"r5.large"}}, 0, "max_hourly_cost $0.2000/h: 1 glideins may cost $0.1260/h, and c7i.large (up to $0.0892/h)"},
		{"within max_hourly_cost", api.FactoryLimits{MaxHourlyCost: 1}, []string{"1/1000", "1/3000"}, [][]string{{"r5.large"}}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.limits
			l.MaxQueued, l.MaxRunning, l.Ramp = 10, 10, api.RampNone
			f, st := offerFactory(l)
			v := &view{st: st, ok: true, running: len(tc.live), claimed: len(tc.live)}
			for i, o := range tc.live {
				id := fmt.Sprintf("pond-x-cloud-%d-0", i)
				f.records[id] = &Record{ID: id, Entry: "cloud", Phase: Submitted, Offers: o}
			}
			f.demand([]*view{v}, testJobs(t, tc.jobs...), nil)
			f.plan([]*view{v}, time.Now())
			if v.submit != tc.submit {
				t.Fatalf("%d submissions, want %d (capped %q)", v.submit, tc.submit, st.capped)
			}
			if tc.capped == "" && st.capped != "" || !strings.Contains(st.capped, tc.capped) {
				t.Fatalf("capped %q, want %q", st.capped, tc.capped)
			}
			s := f.Status()
			if len(s.Entries) != 1 || s.Entries[0].Capped != st.capped {
				t.Fatalf("status %+v: want capped %q", s.Entries, st.capped)
			}
			if tc.capped != "" && (len(st.events) == 0 || st.events[len(st.events)-1].What != "capped") {
				t.Fatalf("events %+v: want a capped event", st.events)
			}
		})
	}
}

// TestOfferTemplate checks the template of a glidein started on an offer:
// the offer's resources, its GPUs as the attribute Gpus the startd
// advertises, and the entry's own template untouched.
func TestOfferTemplate(t *testing.T) {
	_, st := offerFactory(api.FactoryLimits{})
	st.e.Template.Attributes = map[string]string{"Site": `"cloud"`}
	g := st.offerTemplate("g4dn.xlarge")
	if g.CPUs != 4 || g.MemoryMB != 16384 || g.GPUs != 1 || g.Attributes["Gpus"] != "1" || g.Attributes["Site"] != `"cloud"` {
		t.Fatalf("template on g4dn.xlarge: %+v", g)
	}
	if c := st.offerTemplate("c7i.large"); c.CPUs != 2 || c.MemoryMB != 4096 || c.Attributes["Gpus"] != "" {
		t.Fatalf("template on c7i.large: %+v", c)
	}
	if u := st.offerTemplate("x9.huge"); u.CPUs != 1 || u.MemoryMB != 512 {
		t.Fatalf("template on an unknown offer: %+v, want the entry's", u)
	}
	if _, ok := st.e.Template.Attributes["Gpus"]; ok || st.e.Template.CPUs != 1 {
		t.Fatalf("the entry's template changed: %+v", st.e.Template)
	}
}
