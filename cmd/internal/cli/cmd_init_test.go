package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitTakesTerraformFlags checks that init accepts the flags CI
// scripts give terraform init.
func TestInitTakesTerraformFlags(t *testing.T) {
	dir := configDir(t, `pond {}`)
	for _, args := range [][]string{
		{"init", "-input=false"},
		{"init", "-input=false", "-upgrade", "-reconfigure", "-lock=false"},
		{"init", "-lock-timeout=5s", "-upgrade=true"},
	} {
		code, stdout, stderr := pondctl(t, dir, nil, append(args, "-no-color")...)
		if code != 0 || !strings.Contains(stdout, "successfully initialized") {
			t.Errorf("pondctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
		}
	}
}

// TestInitBackendConfig checks that -backend-config settings, given as
// KEY=VALUE or in a file, reach the backend and stay for later commands
// until -reconfigure forgets them, and that bad ones are refused naming
// the flag or the file.
func TestInitBackendConfig(t *testing.T) {
	dir := configDir(t, `pond {
  backend "local" {
    path = "block.state"
  }
}
`)
	state := func(name, lineage string) {
		writeState(t, dir, lineage, 3)
		if err := os.Rename(filepath.Join(dir, "pond.state"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	state("block.state", "from-block")
	state("flag.state", "from-flag")
	state("file.state", "from-file")
	if err := os.WriteFile(filepath.Join(dir, "backend.hcl"), []byte("path = \"file.state\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lineage := func() string {
		t.Helper()
		code, stdout, stderr := pondctl(t, dir, nil, "state", "pull")
		if code != 0 {
			t.Fatalf("state pull: exit %d\n%s", code, stderr)
		}
		for _, l := range []string{"from-block", "from-flag", "from-file"} {
			if strings.Contains(stdout, l) {
				return l
			}
		}
		return stdout
	}
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"init", "-backend-config=path=flag.state"}, "from-flag"},
		{[]string{"init"}, "from-flag"}, // kept
		{[]string{"init", "-backend-config=backend.hcl"}, "from-file"},
		{[]string{"init", "-backend-config=backend.hcl", "-backend-config", "path=flag.state"}, "from-flag"}, // later wins
		{[]string{"init", "-reconfigure"}, "from-block"},
	}
	for _, s := range steps {
		code, stdout, stderr := pondctl(t, dir, nil, append(s.args, "-no-color")...)
		if code != 0 {
			t.Fatalf("pondctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(s.args, " "), code, stdout, stderr)
		}
		if got := lineage(); got != s.want {
			t.Errorf("after pondctl %s: state %s, want %s", strings.Join(s.args, " "), got, s.want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.hcl"), []byte("path = \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		flag string
		want []string
	}{
		{"-backend-config=nosuch.hcl", []string{`-backend-config="nosuch.hcl"`, "neither KEY=VALUE nor a readable file"}},
		{"-backend-config=bad.hcl", []string{"bad.hcl:1"}},
		{"-backend-config=bucket=x", []string{`unknown setting "bucket"`}},
		{"-backend-config==x", []string{"not a setting name"}},
	} {
		code, _, stderr := pondctl(t, dir, nil, "init", "-no-color", tt.flag)
		if code != 1 {
			t.Errorf("init %s: exit %d, want 1\n%s", tt.flag, code, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("init %s: stderr lacks %q:\n%s", tt.flag, w, stderr)
			}
		}
	}
	// A refused init keeps what the last good one saved.
	if got := lineage(); got != "from-block" {
		t.Errorf("after refused inits: state %s", got)
	}
}

// FuzzBackendConfig feeds -backend-config files to their parser: it
// must not panic, and an error names the flag.
func FuzzBackendConfig(f *testing.F) {
	f.Add([]byte("path = \"x.state\"\n"))
	f.Add([]byte("force_path_style = true\nbucket = \"b\"\n"))
	f.Add([]byte("path = \n"))
	f.Add([]byte("path = [1]\n"))
	f.Add([]byte("block {}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "b.hcl"), src, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := backendConfigFlags{"b.hcl"}.settings(dir)
		if err != nil && !strings.Contains(err.Error(), "-backend-config") {
			t.Errorf("error does not name the flag: %v", err)
		}
	})
}

// TestBackendConfigNestedTooDeeply checks that a -backend-config file
// nested deeper than the HCL parser's stack allows fails with an error at
// file:line:col instead of crashing pondctl.
func TestBackendConfigNestedTooDeeply(t *testing.T) {
	dir := t.TempDir()
	src := "path = " + strings.Repeat("[", 200_000) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "b.hcl"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := backendConfigFlags{"b.hcl"}.settings(dir)
	if err == nil || !strings.Contains(err.Error(), "-backend-config: b.hcl:1,") || !strings.Contains(err.Error(), "Nested too deeply") {
		t.Fatalf("got %v, want a nesting error at b.hcl:1", err)
	}
}
