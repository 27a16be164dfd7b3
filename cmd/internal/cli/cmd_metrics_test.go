package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/state"
)

// TestMetricsTargets: pondctl metrics targets writes the pool's agents as
// file_sd targets, a 0600 token that may only read the sea, and a
// scrape configuration naming them; bad input says why, exit 1.
func TestMetricsTargets(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), append([]string{"-chdir=" + dir}, args...), strings.NewReader(""), &out, &errOut, nil)
		return code, out.String(), errOut.String()
	}
	// An authority for the working directory.
	if code, _, stderr := run("token", "create", "-subject", "x", "-scope", "SEA_READ", "-lifetime", "1h"); code != 0 {
		t.Fatal(stderr)
	}
	s := state.New()
	s.Resources = append(s.Resources, &state.Resource{Mode: "managed", Type: "pool", Name: "campus", Provider: "provider[\"pond/local\"]",
		Instances: []*state.Instance{{Attributes: json.RawMessage(`{"node_details": [{"name": "campus-0", "api": "127.0.0.1:7001"}, {"name": "campus-1", "api": "127.0.0.1:7002"}]}`)}}})
	b, err := state.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pond.state"), b, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"metrics", "targets", "-out", "prom"}, "needs -pool NAME and -out DIR"},
		{[]string{"metrics", "targets", "-pool", "nope", "-out", "prom"}, `No pool "nope" in the state`},
		{[]string{"metrics", "targets", "-pool", "campus", "-out", "prom", "-lifetime", "-1h"}, "Invalid -lifetime"},
	} {
		if code, _, stderr := run(tc.args...); code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
	}

	code, stdout, stderr := run("metrics", "targets", "-pool", "campus", "-out", "prom")
	if code != 0 || !strings.Contains(stdout, "2 agent(s) of pool campus") {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	out := filepath.Join(dir, "prom")
	var targets []struct {
		Targets []string
		Labels  map[string]string
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "targets.json"))), &targets); err != nil || len(targets) != 1 ||
		strings.Join(targets[0].Targets, " ") != "127.0.0.1:7001 127.0.0.1:7002" || targets[0].Labels["pool"] != "campus" {
		t.Errorf("targets %+v, %v", targets, err)
	}
	tokPath := filepath.Join(out, "token")
	if fi, err := os.Stat(tokPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file %v, %v; want 0600", fi.Mode(), err)
	}
	a, err := auth.OpenAuthority(filepath.Join(dir, ".pond", "auth"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Verifier().Verify(strings.TrimSpace(readFile(t, tokPath)))
	if err != nil || !c.Allows(auth.SeaRead) || c.Allows(auth.SeaWrite) || c.Allows(auth.Read) || c.Allows(auth.Daemon) {
		t.Errorf("token claims %+v, %v: want SEA_READ only", c, err)
	}
	cfg := readFile(t, filepath.Join(out, "prometheus.yml"))
	for _, want := range []string{`credentials_file: "` + tokPath + `"`, `files: ["` + filepath.Join(out, "targets.json") + `"]`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("prometheus.yml lacks %s:\n%s", want, cfg)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
