package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// TestSeaFactory sets an entry of a central manager's factory with
// `pondctl sea factory -set`, shows it as a table and with -json, refuses
// a bad one with the field named, and removes it.
func TestSeaFactory(t *testing.T) {
	dir := t.TempDir()
	cm := startCM(t, filepath.Join(dir, "cm"))

	key, known := filepath.Join(dir, "key"), filepath.Join(dir, "known_hosts")
	sshtest.GenerateKey(t, key)
	os.WriteFile(known, nil, 0o600)
	entry := `{"name": "hosts", "site": {"kind": "ssh", "config": {"Hosts": ["127.0.0.1:1"], "KeyFile": "` + key +
		`", "KnownHosts": "` + known + `"}}, "template": {"cpus": 1, "memory_mb": 512, "lifetime": "1h"},
		"limits": {"max_queued": 1, "max_running": 2}}`
	good, bad := filepath.Join(dir, "good.json"), filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte(entry), 0o600)
	os.WriteFile(bad, []byte(strings.Replace(entry, `"memory_mb": 512`, `"memory_mb": 0`, 1)), 0o600)
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), append([]string{"-chdir=" + dir, "sea", "factory", "-sea", cm.APIAddr()}, args...),
			strings.NewReader(""), &out, &errOut, []string{"HOME=" + dir})
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := run("-set", bad); code != 1 || !strings.Contains(errOut, "template.memory_mb") {
		t.Errorf("a bad entry: exit %d, %s", code, errOut)
	}
	if code, out, errOut := run("-set", good); code != 0 || !strings.Contains(out, "Set the entry hosts") {
		t.Fatalf("set: exit %d, %s %s", code, out, errOut)
	}
	if code, out, _ := run(); code != 0 || !strings.Contains(out, "hosts") || !strings.Contains(out, "Requested") {
		t.Errorf("table: exit %d, %s", code, out)
	}
	code, out, _ := run("-json")
	var st api.FactoryStatus
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Entries) != 1 || st.Entries[0].Name != "hosts" {
		t.Fatalf("-json: exit %d, %s", code, out)
	}
	if code, out, _ := run("-remove", "hosts"); code != 0 || !strings.Contains(out, "Removed") {
		t.Fatalf("remove: exit %d, %s", code, out)
	}
	if _, out, _ := run(); !strings.Contains(out, "no entry") {
		t.Errorf("after remove: %s", out)
	}
}

// startCM runs a pool's central-manager agent with an open API on
// data, until the test ends.
func startCM(t *testing.T, data string) *agent.Agent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := agent.New(ctx, &agent.Config{Name: "cm", Role: "cm", Pool: "campus", Bind: "127.0.0.1:0",
		API: "127.0.0.1:0", GossipProfile: "fast", DataDir: data, InsecureAPI: true}, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cm.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return cm
}

// TestPrintFactoryCredentials: the table says what the factory holds
// (its delegated key, its CA's expiry) and, per entry, when the first of
// its glideins' credentials expires, or that they expired.
func TestPrintFactoryCredentials(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	entry := func(exp time.Time) api.FactoryEntry { return api.FactoryEntry{Name: "hpc", CredentialsExpire: exp} }
	for _, tc := range []struct {
		name string
		st   api.FactoryStatus
		want []string
	}{
		{"key, CA and a glidein's token", api.FactoryStatus{Pool: "campus",
			Credentials: &api.FactoryCredentialsStatus{KeyID: "k1", Prefix: "pond-campus-", CAExpires: now.Add(30 * 24 * time.Hour)},
			Entries:     []api.FactoryEntry{entry(now.Add(4*time.Hour + 30*time.Second))}},
			[]string{"Credentials: key k1 for pond-campus-*; CA expires 2026-12-25T12:00:00Z (in 720h0m0s)",
				"Credentials expire", "2026-11-25T16:00:30Z (in 4h0m30s)"}},
		{"expired", api.FactoryStatus{Pool: "campus", Credentials: &api.FactoryCredentialsStatus{CAExpires: now.Add(-time.Hour)},
			Entries: []api.FactoryEntry{entry(now.Add(-time.Second))}},
			[]string{"Credentials: CA expires 2026-11-25T11:00:00Z (expired)", "2026-11-25T11:59:59Z (expired)"}},
		{"no glidein holds any", api.FactoryStatus{Pool: "campus", NeedsCredentials: true, Entries: []api.FactoryEntry{entry(time.Time{})}},
			[]string{"Credentials: none: the sea requires tokens", "hpc "}},
	} {
		var out bytes.Buffer
		if err := printFactory(&out, &tc.st, now); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: the table lacks %q:\n%s", tc.name, w, out.String())
			}
		}
	}
}
