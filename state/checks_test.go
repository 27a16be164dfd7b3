package state

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// checkedSample is sample() with the check results of an apply: one
// failing check, one passing, one not evaluated.
func checkedSample() *State {
	s := sample()
	s.CheckResults = []*CheckResult{
		{ObjectKind: "check", ConfigAddr: "check.size", Status: "fail", Objects: []*CheckObject{
			{ObjectAddr: "check.size", Status: "fail", FailureMessages: []string{"pool w runs 2 nodes, not 3.", "<&> \"quoted\""}},
		}},
		{ObjectKind: "check", ConfigAddr: "check.cm", Status: "pass", Objects: []*CheckObject{{ObjectAddr: "check.cm", Status: "pass"}}},
		{ObjectKind: "check", ConfigAddr: "check.later", Status: "unknown"},
	}
	return s
}

func TestCheckResultsRoundTrip(t *testing.T) {
	s := checkedSample()
	enc, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := stdEncode(t, s); !bytes.Equal(enc, want) {
		t.Fatalf("Encode differs from encoding/json:\n%s\n---\n%s", enc, want)
	}
	for _, want := range []string{`"check_results": [`, `"object_kind": "check"`, `"config_addr": "check.size"`, `"failure_messages": [`, `"objects": null`} {
		if !bytes.Contains(enc, []byte(want)) {
			t.Fatalf("encoded state lacks %s:\n%s", want, enc)
		}
	}
	back, err := Decode(enc, "state")
	if err != nil {
		t.Fatalf("Decode: %v\n%s", err, enc)
	}
	if !reflect.DeepEqual(back.CheckResults, s.CheckResults) {
		t.Fatalf("check results after a round trip: %+v, want %+v", back.CheckResults, s.CheckResults)
	}
	if !ContentEqual(s, back) {
		t.Fatal("the round trip changed the content")
	}

	c := s.DeepCopy()
	c.CheckResults[0].Objects[0].FailureMessages[0] = "changed"
	c.CheckResults[1].Status = "fail"
	if s.CheckResults[0].Objects[0].FailureMessages[0] != "pool w runs 2 nodes, not 3." || s.CheckResults[1].Status != "pass" {
		t.Fatal("DeepCopy shares the check results")
	}

	// A state without check results encodes without the member, as
	// before pond kept them.
	plain, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, []byte("check_results")) {
		t.Fatalf("a state without check results has the member:\n%s", plain)
	}
}

// TestCheckResultsAreContent checks that a change of the check results
// alone is a change of the state, written with a new serial, so that the
// stored results are always the last apply's.
func TestCheckResultsAreContent(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *State)
	}{
		{"status", func(s *State) { s.CheckResults[1].Status = "fail" }},
		{"object status", func(s *State) { s.CheckResults[1].Objects[0].Status = "error" }},
		{"message", func(s *State) { s.CheckResults[0].Objects[0].FailureMessages[0] = "pool w runs 1 node, not 3." }},
		{"no message", func(s *State) { s.CheckResults[0].Objects[0].FailureMessages = nil }},
		{"evaluated", func(s *State) {
			s.CheckResults[2].Status = "pass"
			s.CheckResults[2].Objects = []*CheckObject{{ObjectAddr: "check.later", Status: "pass"}}
		}},
		{"gone", func(s *State) { s.CheckResults = s.CheckResults[:2] }},
		{"none", func(s *State) { s.CheckResults = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := checkedSample()
			next := stored.DeepCopy()
			tt.change(next)
			if ContentEqual(stored, next) {
				t.Fatal("ContentEqual ignores the change")
			}
			if !PrepareWrite(stored, next) || next.Serial != stored.Serial+1 {
				t.Fatalf("PrepareWrite: serial %d after %d, want a write", next.Serial, stored.Serial)
			}
		})
	}
	same := checkedSample()
	if !ContentEqual(checkedSample(), same) || PrepareWrite(checkedSample(), same) {
		t.Fatal("the same check results are a change")
	}
}

func TestDecodeBadCheckResults(t *testing.T) {
	head := `{"format_version":1,"serial":1,"lineage":"l","outputs":{},"resources":[],
"check_results":`
	tests := []struct {
		name, results, want string
	}{
		{"not a list", `{}`, "state:2:17: check_results: invalid check_results:"},
		{"null entry", `[null]`, "check_results[0]: check result is null"},
		{"kind", `[{"object_kind":"resource","config_addr":"pool.p","status":"pass","objects":null}]`, `check_results[0].object_kind: object_kind is "resource", want check`},
		{"no address", `[{"object_kind":"check","status":"pass","objects":null}]`, `check_results[0]: missing "config_addr"`},
		{"status", `[{"object_kind":"check","config_addr":"check.a","status":"ok","objects":null}]`, `check_results[0].status: status is "ok", want one of pass, fail, error, unknown`},
		{"duplicate", `[{"object_kind":"check","config_addr":"check.a","status":"pass","objects":null},{"object_kind":"check","config_addr":"check.a","status":"pass","objects":null}]`, "check_results[1].config_addr: duplicate check result check.a"},
		{"object status", `[{"object_kind":"check","config_addr":"check.a","status":"fail","objects":[{"object_addr":"check.a","status":"bad"}]}]`, `check_results[0].objects[0].status: status is "bad"`},
		{"object address", `[{"object_kind":"check","config_addr":"check.a","status":"fail","objects":[{"status":"fail"}]}]`, `check_results[0].objects[0]: missing "object_addr"`},
		{"messages", `[{"object_kind":"check","config_addr":"check.a","status":"fail","objects":[{"object_addr":"check.a","status":"fail","failure_messages":"x"}]}]`, "invalid check_results: objects.failure_messages: cannot use a JSON string here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Decode([]byte(head+tt.results+"}"), "state")
			if err == nil {
				t.Fatalf("Decode accepted %s: %+v", tt.results, s.CheckResults)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
	// And Encode refuses what Decode would.
	s := sample()
	s.CheckResults = []*CheckResult{{ObjectKind: "check", ConfigAddr: "check.a", Status: "maybe"}}
	if _, err := Encode(s); err == nil || !strings.Contains(err.Error(), `status is "maybe"`) {
		t.Fatalf("Encode of an invalid status: %v", err)
	}
}
