package cli

import (
	"github.com/hashicorp/hcl/v2"

	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/state"
)

// writeState stores a state of the given lineage and serial as dir's
// pond.state.
func writeState(t *testing.T, dir, lineage string, serial uint64) {
	t.Helper()
	s := state.New()
	s.Lineage = lineage
	s.Serial = serial
	data, err := state.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pond.state"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestApplySavedPlanOfAnotherState checks that a saved plan is refused when
// the state is not the one it was made from: by lineage when the state was
// replaced by another (whatever its serial), by serial when it moved on.
func TestApplySavedPlanOfAnotherState(t *testing.T) {
	const (
		planned = "11111111-1111-4111-8111-111111111111"
		other   = "22222222-2222-4222-8222-222222222222"
	)
	tests := []struct {
		name    string
		lineage string
		serial  uint64
		want    string
	}{
		{"other lineage, same serial", other, 3, "was made for state lineage " + planned + ", but the state is lineage " + other},
		{"other lineage, other serial", other, 5, "was made for state lineage " + planned + ", but the state is lineage " + other},
		{"same lineage, later serial", planned, 4, "was made (serial 3, now 4)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := configDir(t, "output \"x\" {\n  value = 1\n}\n")
			writeState(t, dir, planned, 3)
			plan := filepath.Join(dir, "p.plan")
			if code, stdout, stderr := pondctl(t, dir, nil, "plan", "-input=false", "-no-color", "-out="+plan); code != 0 {
				t.Fatalf("plan: exit code %d\n%s%s", code, stdout, stderr)
			}
			writeState(t, dir, tt.lineage, tt.serial)
			code, stdout, stderr := pondctl(t, dir, nil, "apply", "-input=false", "-no-color", plan)
			if code != 1 {
				t.Fatalf("apply: exit code %d, want 1\n%s%s", code, stdout, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Fatalf("apply error lacks %q:\n%s", tt.want, stderr)
			}
		})
	}
}

// TestUnseenWarnings checks that the warnings an apply repeats from its
// plan are dropped, each other one kept once.
func TestUnseenWarnings(t *testing.T) {
	at := func(line int) *hcl.Range {
		return &hcl.Range{Filename: "main.pond.hcl", Start: hcl.Pos{Line: line, Column: 1}, End: hcl.Pos{Line: line, Column: 5}}
	}
	w := func(summary string, r *hcl.Range) *hcl.Diagnostic {
		return &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: "d", Subject: r}
	}
	plan := hcl.Diagnostics{w("Will start 2 agent processes", at(1)), w("Will start 3 agent processes", at(5))}
	apply := hcl.Diagnostics{w("Will start 2 agent processes", at(1)), w("Will start 3 agent processes", at(5)),
		w("Will start 3 agent processes", at(5)), w("Will start 4 agent processes", at(9)), w("Will start 4 agent processes", at(9)),
		w("Will start 2 agent processes", at(12))}
	got := unseen(apply, plan)
	if len(got) != 2 || got[0].Summary != "Will start 4 agent processes" || got[1].Subject.Start.Line != 12 {
		t.Errorf("unseen = %v", got)
	}
}
