package cli

import (
	"log/slog"
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

// TestAgentLogging checks where "pondctl agent" logs: at info to stderr by
// default, at POND_LOG's level to POND_LOG_PATH when set, and that an
// unknown level stops it.
func TestAgentLogging(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.log")
	tests := []struct {
		name      string
		env       map[string]string
		level     slog.Level
		toFile    bool
		wantError string
	}{
		{name: "default", level: slog.LevelInfo},
		{name: "level", env: map[string]string{"POND_LOG": "debug"}, level: slog.LevelDebug},
		{name: "level and file", env: map[string]string{"POND_LOG": "warn", "POND_LOG_PATH": path}, level: slog.LevelWarn, toFile: true},
		{name: "unknown level", env: map[string]string{"POND_LOG": "loud"}, wantError: `POND_LOG is "loud"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			logs, closeLog, err := agentLogging(func(k string) string { return tt.env[k] }, &stderr)
			defer closeLog()
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("err = %v, want %q", err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if logs.Level != tt.level {
				t.Errorf("level %v, want %v", logs.Level, tt.level)
			}
			if f, ok := logs.Output.(*os.File); ok != tt.toFile || (ok && f.Name() != path) {
				t.Errorf("output %v, want a file: %v", logs.Output, tt.toFile)
			}
		})
	}
	code, _, stderr := pondctl(t, t.TempDir(), []string{"POND_LOG=loud"}, "agent", "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, `pondctl agent: POND_LOG is "loud"`) {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}
