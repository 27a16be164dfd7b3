package startd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

func newStartd(t *testing.T, knobs map[string]string) *Startd {
	t.Helper()
	cfg := config.New(config.Options{})
	for k, v := range knobs {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Options{Config: cfg, Name: "node1", Address: "127.0.0.1:1", DataDir: t.TempDir(), Attrs: map[string]string{"Site": `"campus"`},
		SharedExecute: sharedExecute(t)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sharedExecute is a test's own Options.SharedExecute, below a directory
// every user may enter, removed at its end.
func sharedExecute(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "execute")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "shared")
}

func TestSlotLayout(t *testing.T) {
	tests := []struct {
		name  string
		knobs map[string]string
		want  []string // Name/SlotType/Cpus/Memory
	}{
		{"default partitionable", map[string]string{"NUM_CPUS": "4", "MEMORY": "4096"},
			[]string{"slot1@node1 Partitionable 4 4096"}},
		{"static NUM_SLOTS", map[string]string{"NUM_CPUS": "4", "MEMORY": "4096", "NUM_SLOTS": "2"},
			[]string{"slot1@node1 Static 2 2048", "slot2@node1 Static 2 2048"}},
		{"slot types", map[string]string{"NUM_CPUS": "4", "MEMORY": "4000", "SLOT_TYPE_1": "cpus=1, memory=25%",
			"NUM_SLOTS_TYPE_1": "1", "SLOT_TYPE_2": "cpus=3, memory=75%", "NUM_SLOTS_TYPE_2": "1", "SLOT_TYPE_2_PARTITIONABLE": "true"},
			[]string{"slot1@node1 Static 1 1000", "slot2@node1 Partitionable 3 3000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStartd(t, tt.knobs)
			var got []string
			for _, ad := range s.Slots() {
				name, _ := ad.EvalAttr("Name").StringValue()
				typ, _ := ad.EvalAttr("SlotType").StringValue()
				got = append(got, name+" "+typ+" "+ad.EvalAttr("Cpus").String()+" "+ad.EvalAttr("Memory").String())
				if c, m := ad.EvalAttr("TotalCpus").String(), ad.EvalAttr("TotalMemory").String(); c != tt.knobs["NUM_CPUS"] || m != tt.knobs["MEMORY"] {
					t.Errorf("%s: TotalCpus %s, TotalMemory %s; want the machine's %s and %s", name, c, m, tt.knobs["NUM_CPUS"], tt.knobs["MEMORY"])
				}
				for _, attr := range []string{"Arch", "OpSys", "Machine", "Disk", "LoadAvg", "KeyboardIdle", "Site", "Start"} {
					if _, ok := ad.Lookup(attr); !ok {
						t.Errorf("%s lacks %s", name, attr)
					}
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("slots %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("slot %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestClaimCarvesDynamicSlots(t *testing.T) {
	s := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "1000", "START": "TARGET.Owner =!= \"mallory\""})
	ctx := context.Background()
	var pclaim string
	for id, sl := range s.claims {
		if sl.partitionable {
			pclaim = id
		}
	}
	job := wire.Ad{"Owner": `"alice"`, "RequestCpus": "1", "RequestMemory": "400", "RequestDisk": "10", "Requirements": "true"}
	r1, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: pclaim, Job: job})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Slot["Name"] != `"slot1_1@node1"` || r1.Slot["Memory"] != "400" || r1.ClaimID == pclaim {
		t.Errorf("dynamic slot %v", r1)
	}
	if _, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: pclaim, Job: job}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: pclaim, Job: job}); !errors.Is(err, wire.ErrConflict) {
		t.Errorf("third claim of 2 cpus: %v, want a conflict", err)
	}
	if _, err := s.Release(ctx, &wire.ReleaseRequest{ClaimID: r1.ClaimID}); err != nil {
		t.Fatal(err)
	}
	mallory := wire.Ad{"Owner": `"mallory"`, "RequestCpus": "1", "RequestMemory": "1"}
	if _, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: pclaim, Job: mallory}); !errors.Is(err, wire.ErrConflict) {
		t.Errorf("claim START rejects: %v, want a conflict", err)
	}
	if _, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: "forged", Job: job}); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("claim with a forged id: %v, want not found", err)
	}
	if _, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: pclaim, Job: job}); err != nil {
		t.Errorf("claim after release: %v", err)
	}
}

func TestBadPolicy(t *testing.T) {
	cfg := config.New(config.Options{})
	cfg.Set("START", "KeyboardIdle >")
	if _, err := New(Options{Config: cfg, DataDir: t.TempDir()}); err == nil {
		t.Fatal("bad START accepted")
	}
}

// TestReconfigStamps checks that attributes named by STARTD_ATTRS at run
// time reach the slot ads, and leave them when they are no longer named.
func TestReconfigStamps(t *testing.T) {
	s := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "2048"})
	tests := []struct {
		name  string
		knobs map[string]string
		want  map[string]string // attribute -> value; "" means absent
	}{
		{"stamped", map[string]string{"STARTD_ATTRS": "PondName PondID", "PondName": `"burst"`, "PondID": `"id-1"`},
			map[string]string{"PondName": `"burst"`, "PondID": `"id-1"`, "Site": `"campus"`}},
		{"restamped", map[string]string{"STARTD_ATTRS": "PondName", "PondName": `"other"`},
			map[string]string{"PondName": `"other"`, "PondID": "", "Site": `"campus"`}},
		{"cleared", map[string]string{}, map[string]string{"PondName": "", "PondID": "", "Site": `"campus"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.New(config.Options{})
			for k, v := range tt.knobs {
				if err := cfg.Set(k, v); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Reconfig(cfg); err != nil {
				t.Fatal(err)
			}
			for _, ad := range s.Slots() {
				for attr, want := range tt.want {
					e, ok := ad.Lookup(attr)
					switch {
					case want == "" && ok:
						t.Errorf("%s still present: %s", attr, e)
					case want != "" && (!ok || e.String() != want):
						t.Errorf("%s = %v, want %s", attr, e, want)
					}
				}
			}
		})
	}
	if err := s.Reconfig(mustConfig(t, map[string]string{"STARTD_ATTRS": "Bad", "Bad": "1 +"})); err == nil {
		t.Fatal("a bad STARTD_ATTRS expression was accepted")
	}
}

func mustConfig(t *testing.T, knobs map[string]string) *config.Config {
	t.Helper()
	cfg := config.New(config.Options{})
	for k, v := range knobs {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}
