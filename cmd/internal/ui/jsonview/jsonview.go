// Package jsonview writes pondctl's machine-readable UI: the stream of JSON
// messages, one per line, that plan, apply, destroy, refresh and test print
// with -json, in the format of Terraform's machine-readable UI.
//
// Every message is an object with "@level" (info, warn or error),
// "@message" (what the text UI would say), "@module" ("pondctl.ui"),
// "@timestamp" (RFC 3339 with nanoseconds) and "type"; the rest depends on
// the type. The first message of a stream is of type "version" and names
// the format's version in "ui": a consumer ignores the fields it does not
// know, and refuses a major version it does not know.
package jsonview

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// UIVersion is the version of the message format: the minor version grows
// with additions, the major with incompatible changes.
const UIVersion = "1.2"

// Module is the value of every message's "@module".
const Module = "pondctl.ui"

// Message types.
const (
	TypeVersion         = "version"
	TypeLog             = "log"
	TypeDiagnostic      = "diagnostic"
	TypePlannedChange   = "planned_change"
	TypeResourceDrift   = "resource_drift"
	TypeChangeSummary   = "change_summary"
	TypeOutputs         = "outputs"
	TypeApplyStart      = "apply_start"
	TypeApplyProgress   = "apply_progress"
	TypeApplyComplete   = "apply_complete"
	TypeApplyErrored    = "apply_errored"
	TypeRefreshStart    = "refresh_start"
	TypeRefreshComplete = "refresh_complete"
	TypeTestAbstract    = "test_abstract"
	TypeTestFile        = "test_file"
	TypeTestRun         = "test_run"
	TypeTestCleanup     = "test_cleanup"
	TypeTestSummary     = "test_summary"
)

// Levels of "@level".
const (
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// View writes messages to one stream. It is safe for concurrent use: each
// message is written whole, on its own line.
type View struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
	err error
}

// New returns a view writing to w.
func New(w io.Writer) *View {
	return &View{w: w, now: time.Now}
}

// Err returns the first error writing to the stream, if any; later
// messages are dropped after one.
func (v *View) Err() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// Emit writes one message of type typ with the given level and
// human-readable message; fields are the type's own fields, and may also
// carry extra top-level fields ("@testfile", "@testrun"). A field may not
// replace one of the common ones.
func (v *View) Emit(level, typ, message string, fields map[string]any) {
	obj := make(map[string]any, len(fields)+5)
	for k, val := range fields {
		obj[k] = val
	}
	obj["@level"] = level
	obj["@message"] = message
	obj["@module"] = Module
	obj["type"] = typ
	v.mu.Lock()
	defer v.mu.Unlock()
	obj["@timestamp"] = v.now().Format(time.RFC3339Nano)
	if v.err != nil {
		return
	}
	b, err := json.Marshal(obj)
	if err != nil {
		v.err = fmt.Errorf("encoding a %s message: %w", typ, err)
		return
	}
	b = append(b, '\n')
	if _, err := v.w.Write(b); err != nil {
		v.err = fmt.Errorf("writing a %s message: %w", typ, err)
	}
}

// Version writes the stream's first message: the format's version and
// pond's.
func (v *View) Version(pondVersion string) {
	v.Emit(LevelInfo, TypeVersion, "Pond "+pondVersion, map[string]any{"pond": pondVersion, "ui": UIVersion})
}

// Log writes a message of type log.
func (v *View) Log(level, message string) {
	v.Emit(level, TypeLog, message, nil)
}

// Resource identifies a resource instance in planned_change and hook
// messages.
type Resource struct {
	// Addr is the instance's full address (pool.p, pool.w[0]).
	Addr string `json:"addr"`
	// Module is the module path, empty for the root module.
	Module string `json:"module"`
	// Resource is the address without the module.
	Resource        string `json:"resource"`
	ImpliedProvider string `json:"implied_provider"`
	ResourceType    string `json:"resource_type"`
	ResourceName    string `json:"resource_name"`
	// ResourceKey is the instance key: nil, a number or a string.
	ResourceKey any `json:"resource_key"`
}

// Change is one planned change of a resource instance.
type Change struct {
	Resource Resource `json:"resource"`
	// PreviousResource is where a moved block moved the instance from.
	PreviousResource *Resource `json:"previous_resource,omitempty"`
	// Action is one of noop, create, read, update, replace, delete, move,
	// import, remove.
	Action string `json:"action"`
	// Reason says why, when the action is not obvious.
	Reason string `json:"reason,omitempty"`
}

func actionVerb(action string) string {
	switch action {
	case "create":
		return "Plan to create"
	case "update":
		return "Plan to update"
	case "replace":
		return "Plan to replace"
	case "delete":
		return "Plan to delete"
	case "read":
		return "Plan to read"
	case "move":
		return "Plan to move"
	case "import":
		return "Plan to import"
	case "remove":
		return "Plan to remove from the state"
	}
	return "No change"
}

// PlannedChange writes a planned_change message.
func (v *View) PlannedChange(c Change) {
	v.Emit(LevelInfo, TypePlannedChange, c.Resource.Addr+": "+actionVerb(c.Action), map[string]any{"change": c})
}

// ResourceDrift writes a resource_drift message: an instance changed
// outside of pond (action update) or gone (delete).
func (v *View) ResourceDrift(c Change) {
	msg := c.Resource.Addr + ": Drift detected (" + c.Action + ")"
	v.Emit(LevelInfo, TypeResourceDrift, msg, map[string]any{"change": c})
}

// Summary counts the changes of a plan or an apply.
type Summary struct {
	Add    int `json:"add"`
	Change int `json:"change"`
	Import int `json:"import"`
	Remove int `json:"remove"`
	// Operation is plan, apply or destroy.
	Operation string `json:"operation"`
}

// ChangeSummary writes a change_summary message, whose "@message" is the
// line the text UI ends a plan or an apply with.
func (v *View) ChangeSummary(s Summary) {
	var msg string
	switch s.Operation {
	case "apply":
		msg = fmt.Sprintf("Apply complete! Resources: %d added, %d changed, %d destroyed.", s.Add, s.Change, s.Remove)
	case "destroy":
		msg = fmt.Sprintf("Destroy complete! Resources: %d destroyed.", s.Remove)
	default:
		msg = fmt.Sprintf("Plan: %d to add, %d to change, %d to destroy.", s.Add, s.Change, s.Remove)
	}
	if s.Import > 0 && s.Operation == "plan" {
		msg = fmt.Sprintf("Plan: %d to import, %d to add, %d to change, %d to destroy.", s.Import, s.Add, s.Change, s.Remove)
	}
	v.Emit(LevelInfo, TypeChangeSummary, msg, map[string]any{"changes": s})
}

// Output is one root output in an outputs message.
type Output struct {
	Sensitive bool `json:"sensitive"`
	// Type is the value's type in cty's JSON form; Value the value, both
	// left out for a sensitive output or an unknown value.
	Type  json.RawMessage `json:"type,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
	// Action is set in a plan: the output's planned change.
	Action string `json:"action,omitempty"`
}

// Outputs writes an outputs message.
func (v *View) Outputs(outs map[string]Output) {
	v.Emit(LevelInfo, TypeOutputs, fmt.Sprintf("Outputs: %d", len(outs)), map[string]any{"outputs": outs})
}

// Hook is an operation on one resource instance, in apply_* and refresh_*
// messages.
type Hook struct {
	Resource Resource `json:"resource"`
	// Action is create, read, update, delete or replace (apply messages).
	Action string `json:"action,omitempty"`
	// IDKey and IDValue name the instance's ID once known.
	IDKey   string `json:"id_key,omitempty"`
	IDValue string `json:"id_value,omitempty"`
	// ElapsedSeconds is how long the operation has run.
	ElapsedSeconds *float64 `json:"elapsed_seconds,omitempty"`
	// Message is the provider's progress message, for apply_progress.
	Message string `json:"message,omitempty"`
}

// Elapsed returns d in seconds, for Hook.ElapsedSeconds.
func Elapsed(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}

// ApplyStart writes an apply_start message; message is what the text UI
// says after the address ("Creating...").
func (v *View) ApplyStart(h Hook, message string) {
	v.Emit(LevelInfo, TypeApplyStart, h.Resource.Addr+": "+message, map[string]any{"hook": h})
}

// ApplyProgress writes an apply_progress message.
func (v *View) ApplyProgress(h Hook, message string) {
	v.Emit(LevelInfo, TypeApplyProgress, h.Resource.Addr+": "+message, map[string]any{"hook": h})
}

// ApplyComplete writes an apply_complete message.
func (v *View) ApplyComplete(h Hook, message string) {
	v.Emit(LevelInfo, TypeApplyComplete, h.Resource.Addr+": "+message, map[string]any{"hook": h})
}

// ApplyErrored writes an apply_errored message; the error itself follows
// as a diagnostic.
func (v *View) ApplyErrored(h Hook, message string) {
	v.Emit(LevelError, TypeApplyErrored, h.Resource.Addr+": "+message, map[string]any{"hook": h})
}

// RefreshStart writes a refresh_start message.
func (v *View) RefreshStart(h Hook) {
	v.Emit(LevelInfo, TypeRefreshStart, h.Resource.Addr+": Refreshing state...", map[string]any{"hook": h})
}

// RefreshComplete writes a refresh_complete message.
func (v *View) RefreshComplete(h Hook) {
	v.Emit(LevelInfo, TypeRefreshComplete, h.Resource.Addr+": Refresh complete", map[string]any{"hook": h})
}

// Pos is a position in a file: line and column from 1, byte from 0.
type Pos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// Range is a span of a file.
type Range struct {
	Filename string `json:"filename"`
	Start    Pos    `json:"start"`
	End      Pos    `json:"end"`
}

// Diagnostic is an error or a warning.
type Diagnostic struct {
	// Severity is error or warning.
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail"`
	// Address is the resource instance the diagnostic is about, if any.
	Address string `json:"address,omitempty"`
	Range   *Range `json:"range,omitempty"`
}

// Diagnostic writes a diagnostic message; extra adds top-level fields
// (a test's "@testfile" and "@testrun").
func (v *View) Diagnostic(d Diagnostic, extra map[string]any) {
	level, word := LevelError, "Error"
	if d.Severity == "warning" {
		level, word = LevelWarn, "Warning"
	}
	fields := map[string]any{"diagnostic": d}
	for k, val := range extra {
		fields[k] = val
	}
	v.Emit(level, TypeDiagnostic, word+": "+d.Summary, fields)
}
