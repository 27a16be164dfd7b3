package startd

import (
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// TestRankOf checks the machine's Rank that rankOf composes: the
// configured RANK, the lenders-first term on a pool's node (unless
// POND_LENDERS_FIRST is false), and the pond affinity term on a member
// with PondJobIds, evaluated against jobs of the pool, flocked in, of no
// pool, and of the pond.
func TestRankOf(t *testing.T) {
	t.Parallel()
	jobs := map[string]string{
		"local":   `[ClusterId = 1; ProcId = 0; Owner = "alice"; PondSubmitPool = "spare"]`,
		"flocked": `[ClusterId = 1; ProcId = 0; Owner = "alice"; PondSubmitPool = "busy"]`,
		"nopool":  `[ClusterId = 1; ProcId = 0; Owner = "bob"]`,
		"pond":    `[ClusterId = 7; ProcId = 3; Owner = "bob"]`,
		"pondsib": `[ClusterId = 7; ProcId = 4; Owner = "bob"]`,
	}
	for _, tt := range []struct {
		name, cfg string
		want      map[string]float64
	}{
		{"no pool", "", map[string]float64{"local": 0, "flocked": 0, "nopool": 0, "pond": 0}},
		{"pool", "POND_POOL = spare", map[string]float64{"local": 1000, "flocked": 0, "nopool": 0}},
		{"pool, lenders first off", "POND_POOL = spare\nPOND_LENDERS_FIRST = false", map[string]float64{"local": 0, "flocked": 0}},
		{"administrator's rank", "POND_POOL = spare\nRANK = 10 * (Owner == \"alice\")",
			map[string]float64{"local": 1010, "flocked": 10, "nopool": 0}},
		{"administrator's rank undefined for a job", "POND_POOL = spare\nRANK = TARGET.Department == \"physics\"",
			map[string]float64{"local": 1000, "flocked": 0}},
		{"administrator's rank alone", "POND_POOL = spare\nPOND_LENDERS_FIRST = false\nRANK = 10 * (Owner == \"alice\")",
			map[string]float64{"local": 10, "flocked": 10, "nopool": 0}},
		{"pond member", `PondJobIds = "7.3,9.0"`, map[string]float64{"pond": 1000000, "pondsib": 0, "nopool": 0}},
		{"pond member of a pool", "POND_POOL = spare\nPondJobIds = \"1.0\"",
			map[string]float64{"local": 1001000, "flocked": 1000000, "nopool": 1000000, "pond": 0}},
		{"pond member, no jobs", `PondJobIds = ""`, map[string]float64{"pond": 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.New(config.Options{})
			if err := cfg.ParseInto("test.cfg", []byte(tt.cfg+"\n")); err != nil {
				t.Fatal(err)
			}
			rank, err := rankOf(cfg)
			if err != nil {
				t.Fatal(err)
			}
			machine := classad.NewAd()
			if v, ok := cfg.Get(AttrPondJobIds); ok {
				if err := machine.SetExpr(AttrPondJobIds, v); err != nil {
					t.Fatal(err)
				}
			}
			for name, want := range tt.want {
				job, err := classad.ParseAd(jobs[name])
				if err != nil {
					t.Fatal(err)
				}
				got, ok := classad.EvalWith(rank, machine, job).NumberValue()
				if !ok || got != want {
					t.Errorf("Rank %s of the %s job = %v, want %v", rank, name, classad.EvalWith(rank, machine, job), want)
				}
			}
		})
	}
}

// TestRankOfBadInput checks that a RANK that does not parse and a
// POND_LENDERS_FIRST that is no boolean are refused with the knob named.
func TestRankOfBadInput(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"RANK = 1 +", "POND_POOL = spare\nPOND_LENDERS_FIRST = maybe"} {
		cfg := config.New(config.Options{})
		if err := cfg.ParseInto("test.cfg", []byte(src+"\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := rankOf(cfg); err == nil {
			t.Errorf("%q: no error", src)
		} else {
			t.Logf("%q: %v", src, err)
		}
	}
}
