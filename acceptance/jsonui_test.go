package acceptance

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// uiMessage is one line of the machine-readable UI.
type uiMessage struct {
	Level     string `json:"@level"`
	Message   string `json:"@message"`
	Module    string `json:"@module"`
	Timestamp string `json:"@timestamp"`
	Type      string `json:"type"`
	UI        string `json:"ui"`
	Pond      string `json:"pond"`
	Change    struct {
		Resource struct {
			Addr         string `json:"addr"`
			ResourceType string `json:"resource_type"`
			ResourceName string `json:"resource_name"`
		} `json:"resource"`
		Action string `json:"action"`
	} `json:"change"`
	Changes struct {
		Add       int    `json:"add"`
		Change    int    `json:"change"`
		Remove    int    `json:"remove"`
		Operation string `json:"operation"`
	} `json:"changes"`
	Hook struct {
		Resource struct {
			Addr string `json:"addr"`
		} `json:"resource"`
		Action         string   `json:"action"`
		IDValue        string   `json:"id_value"`
		ElapsedSeconds *float64 `json:"elapsed_seconds"`
	} `json:"hook"`
	Outputs map[string]struct {
		Sensitive bool            `json:"sensitive"`
		Value     json.RawMessage `json:"value"`
	} `json:"outputs"`
	Diagnostic struct {
		Severity string `json:"severity"`
		Summary  string `json:"summary"`
		Detail   string `json:"detail"`
		Range    *struct {
			Filename string `json:"filename"`
			Start    struct {
				Line int `json:"line"`
			} `json:"start"`
		} `json:"range"`
	} `json:"diagnostic"`
}

// checkFailures returns the diagnostics of msgs that are check blocks'
// failed assertions.
func checkFailures(msgs map[string][]uiMessage) []uiMessage {
	var out []uiMessage
	for _, d := range msgs["diagnostic"] {
		if strings.HasPrefix(d.Diagnostic.Summary, "Check block") {
			out = append(out, d)
		}
	}
	return out
}

// wantCheckFailure fails t unless fs is the one failure of check "size"
// of checkedPool, as Terraform reports a check block's failed assertion
// in its machine-readable UI: a warning diagnostic (no message type of
// its own) whose detail is the error message, at the condition.
func wantCheckFailure(t *testing.T, fs []uiMessage, out string) {
	t.Helper()
	if len(fs) != 1 {
		t.Fatalf("%d failed checks reported, want 1 (check \"size\"):\n%s", len(fs), out)
	}
	d := fs[0]
	if d.Level != "warn" || d.Message != "Warning: Check block assertion failed" || d.Diagnostic.Severity != "warning" ||
		d.Diagnostic.Summary != "Check block assertion failed" || !strings.HasPrefix(d.Diagnostic.Detail, "pool p runs 2 nodes, not 3.") ||
		d.Diagnostic.Range == nil || d.Diagnostic.Range.Filename != "main.pond.hcl" || d.Diagnostic.Range.Start.Line != 12 {
		t.Fatalf("check \"size\" reported as %+v (range %+v):\n%s", d, d.Diagnostic.Range, out)
	}
}

// checkedPool is smallPool with two check blocks: "size" fails once the
// pool runs (its two nodes are not three), "cm" passes.
const checkedPool = smallPool + `
check "size" {
  assert {
    condition     = length(pool.p.node_details) == 3
    error_message = "pool p runs ${length(pool.p.node_details)} nodes, not 3."
  }
}

check "cm" {
  assert {
    condition     = pool.p.central_manager != ""
    error_message = "pool p has no central manager."
  }
}
`

// uiMessages parses a -json stream: every line must be one message with
// the common fields, the first of type version.
func uiMessages(t *testing.T, out string) map[string][]uiMessage {
	t.Helper()
	byType := map[string][]uiMessage{}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i, line := range lines {
		var m uiMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not a JSON message: %v\n%s", i+1, err, out)
		}
		if _, err := time.Parse(time.RFC3339Nano, m.Timestamp); err != nil || m.Module != "pondctl.ui" || m.Level == "" || m.Message == "" || m.Type == "" {
			t.Fatalf("line %d lacks a common field: %s", i+1, line)
		}
		if i == 0 && (m.Type != "version" || m.UI != "1.2" || m.Pond == "") {
			t.Fatalf("the first line is not the version: %s", line)
		}
		byType[m.Type] = append(byType[m.Type], m)
	}
	return byType
}

// TestMachineReadableUI checks plan -json, apply -json and destroy -json
// against a real local pool: each prints the machine-readable UI stream,
// and plan's -detailed-exitcode still says whether there are changes. A
// check block that fails is a warning diagnostic of apply's stream and of
// the next plan's, at its condition, and one that passes is not in them,
// as in Terraform's (which has no message type for checks).
func TestMachineReadableUI(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", checkedPool)

	r := w.expect(2, "plan", "-json", "-detailed-exitcode")
	msgs := uiMessages(t, r.stdout)
	if fs := checkFailures(msgs); len(fs) != 0 {
		// What the checks need is known only after apply.
		t.Fatalf("the first plan reports failed checks %+v:\n%s", fs, r.stdout)
	}
	pc := msgs["planned_change"]
	if len(pc) != 1 || pc[0].Change.Resource.Addr != "pool.p" || pc[0].Change.Resource.ResourceType != "pool" || pc[0].Change.Action != "create" {
		t.Fatalf("planned changes %+v, want pool.p created:\n%s", pc, r.stdout)
	}
	if cs := msgs["change_summary"]; len(cs) != 1 || cs[0].Changes.Add != 1 || cs[0].Changes.Operation != "plan" ||
		cs[0].Message != "Plan: 1 to add, 0 to change, 0 to destroy." {
		t.Fatalf("change summary %+v:\n%s", cs, r.stdout)
	}

	r = w.expect(1, "apply", "-json")
	if ds := uiMessages(t, r.stdout)["diagnostic"]; len(ds) != 1 || !strings.Contains(ds[0].Message, "auto-approve") {
		t.Fatalf("apply -json without -auto-approve:\n%s", r)
	}

	r = w.expect(0, "apply", "-json", "-auto-approve")
	msgs = uiMessages(t, r.stdout)
	if s := msgs["apply_start"]; len(s) != 1 || s[0].Hook.Resource.Addr != "pool.p" || s[0].Hook.Action != "create" {
		t.Fatalf("apply_start %+v:\n%s", s, r.stdout)
	}
	if c := msgs["apply_complete"]; len(c) != 1 || c[0].Hook.Resource.Addr != "pool.p" || c[0].Hook.ElapsedSeconds == nil || c[0].Hook.IDValue == "" {
		t.Fatalf("apply_complete %+v:\n%s", c, r.stdout)
	}
	wantCheckFailure(t, checkFailures(msgs), r.stdout)
	cs := msgs["change_summary"]
	if len(cs) != 2 || cs[1].Changes.Operation != "apply" || cs[1].Changes.Add != 1 {
		t.Fatalf("change summaries %+v:\n%s", cs, r.stdout)
	}
	// The planned outputs (unknown yet), then their values.
	if o := msgs["outputs"]; len(o) != 2 || !strings.HasPrefix(string(o[1].Outputs["cm"].Value), `"127.0.0.1:`) {
		t.Fatalf("outputs %+v:\n%s", o, r.stdout)
	}

	r = w.expect(0, "plan", "-json", "-detailed-exitcode")
	msgs = uiMessages(t, r.stdout)
	if len(msgs["planned_change"]) != 0 || len(msgs["change_summary"]) != 1 || msgs["change_summary"][0].Changes.Add != 0 {
		t.Fatalf("plan after apply:\n%s", r.stdout)
	}
	wantCheckFailure(t, checkFailures(msgs), r.stdout)

	r = w.expect(0, "destroy", "-json", "-auto-approve")
	msgs = uiMessages(t, r.stdout)
	if pc := msgs["planned_change"]; len(pc) != 1 || pc[0].Change.Action != "delete" {
		t.Fatalf("destroy's planned changes %+v:\n%s", pc, r.stdout)
	}
	if cs := msgs["change_summary"]; len(cs) != 2 || cs[1].Changes.Operation != "destroy" || cs[1].Changes.Remove != 1 {
		t.Fatalf("destroy's change summaries %+v:\n%s", cs, r.stdout)
	}
	if pids := agentPIDs(w.dir); len(pids) != 0 {
		t.Fatalf("agents %v still run after destroy -json", pids)
	}
}
