package cli

import (
	"encoding/json"
	"testing"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/state"
)

// TestPlanChecksJSON checks the checks list of show -json of a plan
// against Terraform's checks representation, field for field: the
// experimental note, the address (kind, name, to_display), the status,
// and the one instance of an evaluated check block with its problems,
// sorted as Terraform sorts them.
func TestPlanChecksJSON(t *testing.T) {
	const note = `"//":"EXPERIMENTAL: see docs for details"`
	tests := []struct {
		name   string
		checks []planner.CheckResult
		want   string // the checks member; "" for none
	}{
		{"no check blocks", nil, ""},
		{"passing", []planner.CheckResult{{Name: "cm", Status: planner.CheckPass, Evaluated: true}},
			`[{` + note + `,"address":{"kind":"check","name":"cm","to_display":"check.cm"},"status":"pass","instances":[{"address":{"to_display":"check.cm"},"status":"pass"}]}]`},
		{"failing", []planner.CheckResult{{Name: "size", Status: planner.CheckFail, Evaluated: true, Failures: []string{"pool p runs 2 nodes, not 3.", "pool p has 0 slots."}}},
			`[{` + note + `,"address":{"kind":"check","name":"size","to_display":"check.size"},"status":"fail","instances":[{"address":{"to_display":"check.size"},"status":"fail","problems":[{"message":"pool p has 0 slots."},{"message":"pool p runs 2 nodes, not 3."}]}]}]`},
		{"unknown until apply", []planner.CheckResult{{Name: "size", Status: planner.CheckUnknown, Evaluated: true}},
			`[{` + note + `,"address":{"kind":"check","name":"size","to_display":"check.size"},"status":"unknown","instances":[{"address":{"to_display":"check.size"},"status":"unknown"}]}]`},
		{"error", []planner.CheckResult{{Name: "ds", Status: planner.CheckError, Evaluated: true}},
			`[{` + note + `,"address":{"kind":"check","name":"ds","to_display":"check.ds"},"status":"error","instances":[{"address":{"to_display":"check.ds"},"status":"error"}]}]`},
		{"not evaluated", []planner.CheckResult{{Name: "size", Status: planner.CheckUnknown}},
			`[{` + note + `,"address":{"kind":"check","name":"size","to_display":"check.size"},"status":"unknown"}]`},
		{"sorted by address", []planner.CheckResult{
			{Name: "size", Status: planner.CheckFail, Evaluated: true, Failures: []string{"too small"}},
			{Name: "cm", Status: planner.CheckPass, Evaluated: true},
		}, `[{` + note + `,"address":{"kind":"check","name":"cm","to_display":"check.cm"},"status":"pass","instances":[{"address":{"to_display":"check.cm"},"status":"pass"}]},` +
			`{` + note + `,"address":{"kind":"check","name":"size","to_display":"check.size"},"status":"fail","instances":[{"address":{"to_display":"check.size"},"status":"fail","problems":[{"message":"too small"}]}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := json.Marshal(planJSON(&planner.Plan{Complete: true, Checks: tt.checks}))
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			if got := string(doc["checks"]); got != tt.want {
				t.Fatalf("checks\n got %s\nwant %s", got, tt.want)
			}
			if string(doc["pond_version"]) == "" || string(doc["format_version"]) == "" {
				t.Fatalf("the plan document lost its versions: %s", data)
			}
		})
	}
}

// TestStateChecksJSON checks the checks list of show -json of a state:
// the check results the state keeps, in the same representation as a
// plan's, and no list for a state without them.
func TestStateChecksJSON(t *testing.T) {
	decode := func(*state.Resource, *state.Instance) any { return nil }
	s := state.New()
	if _, ok := stateJSON(s, decode)["checks"]; ok {
		t.Fatal("a state without check results has a checks list")
	}
	s.CheckResults = planner.StateCheckResults([]planner.CheckResult{
		{Name: "size", Status: planner.CheckFail, Evaluated: true, Failures: []string{"pool p runs 2 nodes, not 3."}},
		{Name: "cm", Status: planner.CheckPass, Evaluated: true},
		{Name: "later", Status: planner.CheckUnknown},
	})
	data, err := json.Marshal(stateJSON(s, decode)["checks"])
	if err != nil {
		t.Fatal(err)
	}
	const note = `"//":"EXPERIMENTAL: see docs for details"`
	want := `[{` + note + `,"address":{"kind":"check","name":"cm","to_display":"check.cm"},"status":"pass","instances":[{"address":{"to_display":"check.cm"},"status":"pass"}]},` +
		`{` + note + `,"address":{"kind":"check","name":"later","to_display":"check.later"},"status":"unknown"},` +
		`{` + note + `,"address":{"kind":"check","name":"size","to_display":"check.size"},"status":"fail","instances":[{"address":{"to_display":"check.size"},"status":"fail","problems":[{"message":"pool p runs 2 nodes, not 3."}]}]}]`
	if string(data) != want {
		t.Fatalf("checks\n got %s\nwant %s", data, want)
	}
}
