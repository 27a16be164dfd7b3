package acceptance

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const metricsPool = `
pool "mon" {
  nodes  = 2
  slots  = 1
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.mon.central_manager
}
`

// metricsSubmit queues three jobs no slot matches: they stay idle (a
// fourth, run.sub, runs and leaves the queue).
const metricsSubmit = "executable   = /bin/true\nrequirements = False\nqueue 3\n"

// TestPrometheusScrapesPool: a real Prometheus, configured by
// "pondctl metrics targets", scrapes a local pool's agents with the
// SEA_READ token and the sea's CA, and its query API shows the schedd's
// jobs; the agents refuse a scrape without a token.
func TestPrometheusScrapesPool(t *testing.T) {
	t.Parallel()
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("no prometheus binary (the Debian package prometheus)")
	}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", metricsPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	w.write("idle.sub", metricsSubmit)
	w.expect(0, "condor", "submit", "-pool", cm, "idle.sub")
	w.write("run.sub", "executable = /bin/true\nqueue 1\n")
	w.expect(0, "condor", "submit", "-pool", cm, "run.sub")

	out := filepath.Join(w.dir, "prom")
	r := w.expect(0, "metrics", "targets", "-pool", "mon", "-out", out)
	if !strings.Contains(r.stdout, "2 agent(s) of pool mon") {
		t.Fatalf("metrics targets: %s", r)
	}
	if fi, err := os.Stat(filepath.Join(out, "token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}

	// Without a token, an agent refuses the scrape.
	scheme := "http"
	if _, err := os.Stat(filepath.Join(out, "ca.pem")); err == nil {
		scheme = "https"
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get(scheme + "://" + cm + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		t.Fatalf("unauthenticated scrape: %s, want 401 or 403", resp.Status)
	}

	port := freePort(t)
	cfg := strings.Replace(mustRead(t, filepath.Join(out, "prometheus.yml")), "scrape_interval: 15s", "scrape_interval: 1s", 1)
	cfgPath := filepath.Join(out, "test.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, prom, "--config.file="+cfgPath, "--storage.tsdb.path="+t.TempDir(),
		"--web.listen-address=127.0.0.1:"+port)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", logs.String())
		}
	})

	base := "http://127.0.0.1:" + port + "/api/v1/query?query="
	want := map[string]float64{
		`sum(pond_schedd_jobs{state="Idle"})`:     3,
		`sum(pond_schedd_submitted_jobs_total)`:   4,
		`sum(pond_schedd_job_starts_total)`:       1,
		`count(up{job="pond-mon"} == 1)`:          2,
		`sum(pond_daemon_up{daemon="COLLECTOR"})`: 1,
	}
	eventually(t, 60*time.Second, func() error {
		for q, v := range want {
			got, err := promQuery(base + url.QueryEscape(q))
			if err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
			if got != v {
				return fmt.Errorf("%s = %v, want %v", q, got, v)
			}
		}
		// The series itself: one, the submitter's idle jobs, labelled
		// with the pool the targets name.
		series, err := promSeries(base + "pond_schedd_jobs")
		if err != nil {
			return err
		}
		if len(series) != 1 || series[0]["state"] != "Idle" || series[0]["pool"] != "mon" || series[0]["owner"] == "" {
			return fmt.Errorf("pond_schedd_jobs: %v", series)
		}
		return nil
	})
}

// promSeries returns the labels of an instant query's series.
func promSeries(u string) ([]map[string]string, error) {
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Metric map[string]string
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	var out []map[string]string
	for _, r := range body.Data.Result {
		out = append(out, r.Metric)
	}
	return out, nil
}

// promQuery returns the single value of an instant query's answer.
func promQuery(u string) (float64, error) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" || len(body.Data.Result) != 1 {
		return 0, fmt.Errorf("answer %+v", body)
	}
	var v float64
	s, _ := body.Data.Result[0].Value[1].(string)
	_, err = fmt.Sscan(s, &v)
	return v, err
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
