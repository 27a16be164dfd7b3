package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// TestDashboardSeries: every series the Grafana dashboard
// (docs/grafana/pond.json) queries is in the /metrics of a real central
// manager's agent with a job queued, a factory entry and a node token.
func TestDashboardSeries(t *testing.T) {
	t.Parallel()
	names := dashboardSeries(t, filepath.Join("..", "..", "docs", "grafana", "pond.json"))
	if len(names) < 20 {
		t.Fatalf("the dashboard names %d series: %v", len(names), names)
	}
	dir := t.TempDir()
	condor := filepath.Join(dir, "condor_config")
	if err := os.WriteFile(condor, []byte("NEGOTIATOR_INTERVAL = 1\nNEGOTIATOR_MIN_INTERVAL = 0\nUPDATE_INTERVAL = 1\nNUM_CPUS = 1\nUID_DOMAIN = example.org\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	tok, err := auth.Mint(k, auth.Claims{Issuer: "test", Subject: "node", Scopes: []auth.Scope{auth.Daemon}, IssuedAt: time.Now(), Expires: expires})
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(dir, "node.token")
	if err := os.WriteFile(tokFile, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	a, stop := startAgentAt(t, &Config{Name: "cm", Role: "cm", Pool: "campus", ConfigFile: condor, Bind: "127.0.0.1:0", API: "127.0.0.1:0",
		GossipProfile: "fast", InsecureAPI: true, TokenFile: tokFile}, "", filepath.Join(dir, "data"))
	defer stop()

	key := filepath.Join(dir, "id_ed25519")
	sshtest.GenerateKey(t, key)
	known := filepath.Join(dir, "known_hosts")
	os.WriteFile(known, nil, 0o600)
	entry := `{"name": "hosts", "site": {"kind": "ssh", "config": {"Hosts": ["127.0.0.1:1"], "KeyFile": "` + key +
		`", "KnownHosts": "` + known + `"}}, "template": {"cpus": 1, "memory_mb": 512, "lifetime": "1h"}, "limits": {"max_queued": 1, "max_running": 1}}`
	if code, body := call(t, a, "PUT", api.PathFactoryEntries+"hosts", entry); code != http.StatusOK {
		t.Fatalf("factory entry: %d %s", code, body)
	}
	f, err := submit.Parse(filepath.Join(dir, "job.sub"), []byte("executable = /bin/true\nrequirements = False\nqueue 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tools.SubmitFile(context.Background(), wire.NewSchedd(a.APIAddr(), ""), f, submit.Options{Owner: "alice", SubmitDir: dir,
		Env: []string{}, LookupEnv: func(string) (string, bool) { return "", false }}); err != nil {
		t.Fatal(err)
	}

	var body string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var code int
		code, body = call(t, a, "GET", api.PathMetrics, "")
		missing := []string{}
		for _, n := range names {
			if code != http.StatusOK || !regexp.MustCompile(`(?m)^`+n+`[{ ]`).MatchString(body) {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics (%d) lacks %v:\n%s", code, missing, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, want := range []string{
		`pond_schedd_jobs{owner="alice",state="Idle"} 2`,
		`pond_daemon_up{daemon="NEGOTIATOR"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	m := regexp.MustCompile(`pond_credential_expiry_timestamp_seconds{kind="node_token"} (\S+)`).FindStringSubmatch(body)
	var got float64
	if m != nil {
		fmt.Sscan(m[1], &got)
	}
	if int64(got) != expires.Unix() {
		t.Errorf("node token expiry %v, want %d", m, expires.Unix())
	}
}

// dashboardSeries returns the metric names the dashboard's queries name.
func dashboardSeries(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	re := regexp.MustCompile(`\b(pond|go|process)_[a-z_]+\b`)
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range re.FindAllString(tg.Expr, -1) {
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// BenchmarkMetricsScrape: the CPU of one GET /metrics of a central
// manager's agent (collector, negotiator, schedd, startd, gossip, the Go
// runtime and the process) with 10,000 idle jobs queued, the client in the
// same process.
func BenchmarkMetricsScrape(b *testing.B) {
	dir := b.TempDir()
	condor := filepath.Join(dir, "condor_config")
	if err := os.WriteFile(condor, []byte("NUM_CPUS = 1\nUID_DOMAIN = example.org\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := New(ctx, &Config{Name: "cm", Role: "cm", Pool: "campus", ConfigFile: condor, Bind: "127.0.0.1:0", API: "127.0.0.1:0",
		GossipProfile: "fast", InsecureAPI: true, DataDir: filepath.Join(dir, "data")}, nil)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for i := range 10 {
		f, err := submit.Parse(filepath.Join(dir, "job.sub"), []byte("executable = /bin/true\nrequirements = False\nqueue 1000\n"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tools.SubmitFile(ctx, wire.NewSchedd(a.APIAddr(), ""), f, submit.Options{Owner: fmt.Sprintf("user%d", i), SubmitDir: dir,
			Env: []string{}, LookupEnv: func(string) (string, bool) { return "", false }}); err != nil {
			b.Fatal(err)
		}
	}
	url := "http://" + a.APIAddr() + api.PathMetrics
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for b.Loop() {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `pond_schedd_jobs{owner="user9",state="Idle"} 1000`) {
			b.Fatalf("%s: %s", resp.Status, body)
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/scrape")
}
