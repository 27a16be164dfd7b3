package jsonview

import (
	"fmt"
	"strings"
)

// Test statuses, as Terraform's test command reports them.
const (
	StatusPending = "pending"
	StatusSkip    = "skip"
	StatusPass    = "pass"
	StatusFail    = "fail"
	StatusError   = "error"
)

// Test progress values.
const (
	ProgressStarting = "starting"
	ProgressRunning  = "running"
	ProgressTeardown = "teardown"
	ProgressComplete = "complete"
)

// TestAbstract writes a test_abstract message: each test file and the
// names of its runs, in order, before any runs.
func (v *View) TestAbstract(files map[string][]string) {
	runs := 0
	for _, r := range files {
		runs += len(r)
	}
	v.Emit(LevelInfo, TypeTestAbstract, fmt.Sprintf("Found %d %s and %d run %s", len(files), plural(len(files), "file", "files"), runs, plural(runs, "block", "blocks")),
		map[string]any{"test_abstract": files})
}

// TestFile is a test file's progress and, once complete, its status.
type TestFile struct {
	Path     string `json:"path"`
	Progress string `json:"progress"`
	Status   string `json:"status,omitempty"`
}

// TestFile writes a test_file message.
func (v *View) TestFile(f TestFile) {
	msg := f.Path + "... in progress"
	if f.Progress == ProgressTeardown {
		msg = f.Path + "... tearing down"
	}
	if f.Progress == ProgressComplete {
		msg = f.Path + "... " + f.Status
	}
	v.Emit(LevelInfo, TypeTestFile, msg, map[string]any{"test_file": f, "@testfile": f.Path})
}

// TestRun is a run block's progress and, once complete, its status.
type TestRun struct {
	Path     string `json:"path"`
	Run      string `json:"run"`
	Progress string `json:"progress"`
	// Elapsed is the run's duration so far in milliseconds.
	Elapsed int64  `json:"elapsed"`
	Status  string `json:"status,omitempty"`
}

// TestRun writes a test_run message.
func (v *View) TestRun(r TestRun) {
	msg := fmt.Sprintf("  %q... in progress", r.Run)
	if r.Progress == ProgressComplete {
		msg = fmt.Sprintf("  %q... %s", r.Run, r.Status)
	}
	v.Emit(LevelInfo, TypeTestRun, msg, map[string]any{"test_run": r, "@testfile": r.Path, "@testrun": r.Run})
}

// TestCleanup writes a test_cleanup message: the resources a test file
// applied that its clean-up failed to destroy, which are still running.
func (v *View) TestCleanup(path string, failed []string) {
	v.Emit(LevelError, TypeTestCleanup, "Pond left the following resources in state after executing "+path+", and they need to be cleaned up manually: "+strings.Join(failed, ", "),
		map[string]any{"test_cleanup": map[string]any{"failed_resources": failed}, "@testfile": path})
}

// TestSummary is the result of a whole test command.
type TestSummary struct {
	Status  string `json:"status"`
	Passed  int    `json:"passed"`
	Failed  int    `json:"failed"`
	Errored int    `json:"errored"`
	Skipped int    `json:"skipped"`
}

// Message is the line the text UI ends a test command with.
func (s TestSummary) Message() string {
	total := s.Passed + s.Failed + s.Errored + s.Skipped
	switch {
	case total == 0:
		return "Executed 0 tests."
	case s.Status == StatusPass || s.Status == StatusSkip:
		msg := fmt.Sprintf("Success! %d passed, %d failed", s.Passed, s.Failed+s.Errored)
		if s.Skipped > 0 {
			msg += fmt.Sprintf(", %d skipped", s.Skipped)
		}
		return msg + "."
	}
	msg := fmt.Sprintf("Failure! %d passed, %d failed", s.Passed, s.Failed+s.Errored)
	if s.Skipped > 0 {
		msg += fmt.Sprintf(", %d skipped", s.Skipped)
	}
	return msg + "."
}

// TestSummary writes a test_summary message.
func (v *View) TestSummary(s TestSummary) {
	level := LevelInfo
	if s.Status == StatusFail || s.Status == StatusError {
		level = LevelError
	}
	v.Emit(level, TypeTestSummary, s.Message(), map[string]any{"test_summary": s})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
