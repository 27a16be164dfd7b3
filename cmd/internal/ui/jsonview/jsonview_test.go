package jsonview

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// decode parses every line of out as one JSON object.
func decode(t *testing.T, out string) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not a JSON object: %v", sc.Text(), err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// roundTrip re-encodes v as JSON and decodes it as a generic object, so
// that expected values are compared as a consumer reads them.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMessages(t *testing.T) {
	res := Resource{Addr: "pool.p", Resource: "pool.p", ImpliedProvider: "local", ResourceType: "pool", ResourceName: "p"}
	hook := Hook{Resource: res, Action: "create", IDKey: "id", IDValue: "p-1", ElapsedSeconds: Elapsed(1500 * time.Millisecond)}
	tests := []struct {
		name    string
		emit    func(v *View)
		level   string
		typ     string
		message string
		fields  map[string]any
	}{
		{"version", func(v *View) { v.Version("0.9.1") }, "info", "version", "Pond 0.9.1",
			map[string]any{"pond": "0.9.1", "ui": "1.2"}},
		{"planned_change", func(v *View) { v.PlannedChange(Change{Resource: res, Action: "create"}) }, "info", "planned_change", "pool.p: Plan to create",
			map[string]any{"change": map[string]any{"resource": roundTrip(t, res), "action": "create"}}},
		{"moved", func(v *View) {
			prev := res
			prev.Addr, prev.Resource, prev.ResourceName = "pool.old", "pool.old", "old"
			v.PlannedChange(Change{Resource: res, PreviousResource: &prev, Action: "move"})
		}, "info", "planned_change", "pool.p: Plan to move", nil},
		{"change_summary plan", func(v *View) { v.ChangeSummary(Summary{Add: 2, Change: 1, Remove: 3, Operation: "plan"}) }, "info", "change_summary",
			"Plan: 2 to add, 1 to change, 3 to destroy.",
			map[string]any{"changes": map[string]any{"add": 2.0, "change": 1.0, "import": 0.0, "remove": 3.0, "operation": "plan"}}},
		{"change_summary apply", func(v *View) { v.ChangeSummary(Summary{Add: 1, Operation: "apply"}) }, "info", "change_summary",
			"Apply complete! Resources: 1 added, 0 changed, 0 destroyed.", nil},
		{"change_summary destroy", func(v *View) { v.ChangeSummary(Summary{Remove: 4, Operation: "destroy"}) }, "info", "change_summary",
			"Destroy complete! Resources: 4 destroyed.", nil},
		{"apply_start", func(v *View) { v.ApplyStart(Hook{Resource: res, Action: "create"}, "Creating...") }, "info", "apply_start", "pool.p: Creating...",
			map[string]any{"hook": map[string]any{"resource": roundTrip(t, res), "action": "create"}}},
		{"apply_progress", func(v *View) {
			v.ApplyProgress(Hook{Resource: res, Action: "create", ElapsedSeconds: Elapsed(10 * time.Second)}, "Still creating... [10s elapsed]")
		}, "info", "apply_progress", "pool.p: Still creating... [10s elapsed]",
			map[string]any{"hook": map[string]any{"resource": roundTrip(t, res), "action": "create", "elapsed_seconds": 10.0}}},
		{"apply_complete", func(v *View) { v.ApplyComplete(hook, "Creation complete after 2s [id=p-1]") }, "info", "apply_complete",
			"pool.p: Creation complete after 2s [id=p-1]",
			map[string]any{"hook": map[string]any{"resource": roundTrip(t, res), "action": "create", "id_key": "id", "id_value": "p-1", "elapsed_seconds": 1.5}}},
		{"apply_errored", func(v *View) {
			v.ApplyErrored(Hook{Resource: res, Action: "delete", ElapsedSeconds: Elapsed(0)}, "Destruction errored after 0s")
		},
			"error", "apply_errored", "pool.p: Destruction errored after 0s",
			map[string]any{"hook": map[string]any{"resource": roundTrip(t, res), "action": "delete", "elapsed_seconds": 0.0}}},
		{"diagnostic", func(v *View) {
			v.Diagnostic(Diagnostic{Severity: "error", Summary: "Unsupported argument", Detail: "An argument named \"x\" is not expected here.",
				Range: &Range{Filename: "main.pond.hcl", Start: Pos{Line: 3, Column: 5, Byte: 40}, End: Pos{Line: 3, Column: 6, Byte: 41}}}, nil)
		}, "error", "diagnostic", "Error: Unsupported argument",
			map[string]any{"diagnostic": map[string]any{"severity": "error", "summary": "Unsupported argument", "detail": "An argument named \"x\" is not expected here.",
				"range": map[string]any{"filename": "main.pond.hcl", "start": map[string]any{"line": 3.0, "column": 5.0, "byte": 40.0}, "end": map[string]any{"line": 3.0, "column": 6.0, "byte": 41.0}}}}},
		{"warning", func(v *View) {
			v.Diagnostic(Diagnostic{Severity: "warning", Summary: "Deprecated"}, map[string]any{"@testrun": "r"})
		}, "warn", "diagnostic", "Warning: Deprecated",
			map[string]any{"@testrun": "r", "diagnostic": map[string]any{"severity": "warning", "summary": "Deprecated", "detail": ""}}},
		{"outputs", func(v *View) {
			v.Outputs(map[string]Output{"cm": {Type: json.RawMessage(`"string"`), Value: json.RawMessage(`"127.0.0.1:9618"`)}, "secret": {Sensitive: true}})
		}, "info", "outputs", "Outputs: 2",
			map[string]any{"outputs": map[string]any{"cm": map[string]any{"sensitive": false, "type": "string", "value": "127.0.0.1:9618"}, "secret": map[string]any{"sensitive": true}}}},
		{"test_run", func(v *View) {
			v.TestRun(TestRun{Path: "tests/a.pondtest.hcl", Run: "first", Progress: ProgressComplete, Elapsed: 1234, Status: StatusFail})
		}, "info", "test_run", `  "first"... fail`,
			map[string]any{"@testfile": "tests/a.pondtest.hcl", "@testrun": "first",
				"test_run": map[string]any{"path": "tests/a.pondtest.hcl", "run": "first", "progress": "complete", "elapsed": 1234.0, "status": "fail"}}},
		{"test_file", func(v *View) {
			v.TestFile(TestFile{Path: "tests/a.pondtest.hcl", Progress: ProgressComplete, Status: StatusPass})
		}, "info", "test_file",
			"tests/a.pondtest.hcl... pass",
			map[string]any{"test_file": map[string]any{"path": "tests/a.pondtest.hcl", "progress": "complete", "status": "pass"}}},
		{"test_summary", func(v *View) { v.TestSummary(TestSummary{Status: StatusFail, Passed: 1, Failed: 1}) }, "error", "test_summary",
			"Failure! 1 passed, 1 failed.",
			map[string]any{"test_summary": map[string]any{"status": "fail", "passed": 1.0, "failed": 1.0, "errored": 0.0, "skipped": 0.0}}},
		{"test_summary pass", func(v *View) { v.TestSummary(TestSummary{Status: StatusPass, Passed: 2}) }, "info", "test_summary", "Success! 2 passed, 0 failed.", nil},
		{"test_abstract", func(v *View) { v.TestAbstract(map[string][]string{"a.pondtest.hcl": {"one", "two"}}) }, "info", "test_abstract", "Found 1 file and 2 run blocks",
			map[string]any{"test_abstract": map[string]any{"a.pondtest.hcl": []any{"one", "two"}}}},
		{"test_cleanup", func(v *View) { v.TestCleanup("a.pondtest.hcl", []string{"pool.p"}) }, "error", "test_cleanup", "",
			map[string]any{"test_cleanup": map[string]any{"failed_resources": []any{"pool.p"}}}},
	}
	stamp := time.Date(2026, 11, 29, 11, 22, 30, 123456789, time.FixedZone("X", 3600))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			v := New(&buf)
			v.now = func() time.Time { return stamp }
			tt.emit(v)
			if err := v.Err(); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(buf.String(), "}\n") || strings.Count(buf.String(), "\n") != 1 {
				t.Fatalf("not one line: %q", buf.String())
			}
			msgs := decode(t, buf.String())
			m := msgs[0]
			if m["@level"] != tt.level || m["type"] != tt.typ || m["@module"] != "pondctl.ui" {
				t.Errorf("@level %v, type %v, @module %v; want %s, %s, pondctl.ui", m["@level"], m["type"], m["@module"], tt.level, tt.typ)
			}
			if tt.message != "" && m["@message"] != tt.message {
				t.Errorf("@message %q, want %q", m["@message"], tt.message)
			}
			ts, err := time.Parse(time.RFC3339Nano, m["@timestamp"].(string))
			if err != nil || !ts.Equal(stamp) {
				t.Errorf("@timestamp %v (%v), want %v", m["@timestamp"], err, stamp)
			}
			for k, want := range tt.fields {
				if got := m[k]; !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v\nwant %#v", k, got, want)
				}
			}
		})
	}
}

func TestFieldsCannotReplaceCommonOnes(t *testing.T) {
	var buf bytes.Buffer
	v := New(&buf)
	v.Emit(LevelInfo, TypeLog, "hello", map[string]any{"@level": "error", "type": "x", "@module": "y", "@message": "z"})
	m := decode(t, buf.String())[0]
	if m["@level"] != "info" || m["type"] != "log" || m["@module"] != Module || m["@message"] != "hello" {
		t.Fatalf("common fields replaced: %v", m)
	}
}

// TestConcurrentLines checks that messages written at once from many
// goroutines each take one whole line.
func TestConcurrentLines(t *testing.T) {
	var buf bytes.Buffer
	v := New(&buf)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				v.ApplyProgress(Hook{Resource: Resource{Addr: strings.Repeat("x", i+1)}}, strings.Repeat("y", 100))
			}
		}()
	}
	wg.Wait()
	if n := len(decode(t, buf.String())); n != 16*50 {
		t.Fatalf("%d messages, want %d", n, 16*50)
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("broken pipe")
}

func TestWriteErrorStopsStream(t *testing.T) {
	w := &failWriter{}
	v := New(w)
	v.Version("1")
	v.Log(LevelInfo, "more")
	if v.Err() == nil || w.n != 1 {
		t.Fatalf("Err %v after %d writes; want an error after 1", v.Err(), w.n)
	}
}
