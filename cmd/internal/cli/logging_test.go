package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPondLog checks POND_LOG and POND_LOG_PATH: the planner's and the
// providers' log records at the level asked for, appended to the file named
// or written to stderr, and none when POND_LOG is unset.
func TestPondLog(t *testing.T) {
	dir := configDir(t, unreachablePond)
	t.Run("debug to a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "pond.log")
		env := []string{"POND_LOG=debug", "POND_LOG_PATH=" + path}
		for range 2 {
			if code, _, stderr := pondctl(t, dir, env, "plan", "-input=false", "-no-color"); code != 0 || strings.Contains(stderr, "level=") {
				t.Fatalf("exit code %d, stderr:\n%s", code, stderr)
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		log := string(data)
		for _, want := range []string{
			`level=DEBUG msg="configuring provider" provider=sea`,
			`level=WARN msg="pond plan: query failed" provider=sea address=pond.burst`,
			"level=INFO msg=planning mode=normal",
		} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
		}
		if n := strings.Count(log, "msg=planning"); n != 2 {
			t.Errorf("%d plans in the log, want 2 (appended):\n%s", n, log)
		}
	})
	t.Run("warn to stderr", func(t *testing.T) {
		code, _, stderr := pondctl(t, dir, []string{"POND_LOG=WARN"}, "plan", "-input=false", "-no-color")
		if code != 0 {
			t.Fatalf("exit code %d:\n%s", code, stderr)
		}
		if !strings.Contains(stderr, `level=WARN msg="pond plan: query failed" provider=sea`) || strings.Contains(stderr, "level=INFO") {
			t.Errorf("stderr:\n%s", stderr)
		}
	})
	t.Run("unset", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "pond.log")
		code, _, stderr := pondctl(t, dir, []string{"POND_LOG_PATH=" + path}, "plan", "-input=false", "-no-color")
		if code != 0 || strings.Contains(stderr, "level=") {
			t.Fatalf("exit code %d, stderr:\n%s", code, stderr)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("POND_LOG_PATH without POND_LOG made a log file: %v", err)
		}
	})
	for _, tt := range []struct {
		name string
		env  []string
		want string
	}{
		{"unknown level", []string{"POND_LOG=verbose"}, `POND_LOG is "verbose"; set it to debug, info, warn or error, or leave it unset for no logs`},
		{"unwritable file", []string{"POND_LOG=info", "POND_LOG_PATH=" + t.TempDir()}, "POND_LOG_PATH: open"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, cmd := range [][]string{{"plan", "-input=false"}, {"version"}} {
				code, stdout, stderr := pondctl(t, dir, tt.env, cmd...)
				if code != 1 || stdout != "" {
					t.Errorf("%s: exit code %d, want 1, and stdout %q", cmd[0], code, stdout)
				}
				if !strings.Contains(stderr, "Invalid logging settings") || !strings.Contains(stderr, tt.want) {
					t.Errorf("%s: stderr lacks %q:\n%s", cmd[0], tt.want, stderr)
				}
			}
		})
	}
}
