package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/atomicfile"
)

func (m *meta) cmdMetrics(ctx context.Context, args []string) int {
	return m.subcommand(ctx, "metrics", args, []subcommand{
		{"targets", m.metricsTargets},
	})
}

// Files "pondctl metrics targets" writes in its -out directory.
const (
	metricsTargetsFile = "targets.json"
	metricsTokenFile   = "token"
	metricsCAFile      = "ca.pem"
	metricsConfigFile  = "prometheus.yml"
)

// metricsTargets is "pondctl metrics targets": it writes Prometheus's
// file_sd targets for the agents of a pool (from the state), a token
// that may only read the sea (SEA_READ) for Prometheus to present, the
// sea's CA, and a sample scrape configuration using them.
func (m *meta) metricsTargets(ctx context.Context, args []string) int {
	fs := m.newFlagSet("metrics targets", "metrics targets -pool NAME -out DIR [-lifetime D]")
	pool := fs.String("pool", "", "the `name` of the pool resource whose agents Prometheus scrapes")
	out := fs.String("out", "", "the `directory` to write the targets, the token, the CA and prometheus.yml in")
	lifetime := fs.Duration("lifetime", 30*24*time.Hour, "how long the token made is valid (run the command again to renew it)")
	if !m.parseNoArgs(fs, args) {
		return 1
	}
	if *pool == "" || *out == "" {
		return m.errorf("metrics targets needs -pool NAME and -out DIR")
	}
	if *lifetime <= 0 {
		return m.errorf("Invalid -lifetime %s: a token must last more than zero", *lifetime)
	}
	dir := *out
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(m.dir, dir)
	}
	_, s, ok := m.loadStateOnly(ctx)
	if !ok {
		return 1
	}
	var apis []string
	found := false
	for _, r := range s.Resources {
		if r.Name != *pool || r.Mode == "data" {
			continue
		}
		for _, inst := range r.Instances {
			var attrs struct {
				Nodes []struct {
					API string `json:"api"`
				} `json:"node_details"`
			}
			if err := json.Unmarshal(inst.Attributes, &attrs); err != nil {
				return m.fail("Cannot read the state of "+r.Type+"."+r.Name, err)
			}
			found = true
			for _, n := range attrs.Nodes {
				if n.API != "" {
					apis = append(apis, n.API)
				}
			}
		}
	}
	if !found {
		return m.errorf("No pool %q in the state: give -pool the name of a pool resource (pondctl state list)", *pool)
	}
	if len(apis) == 0 {
		return m.errorf("Pool %q has no agents in the state: apply it first", *pool)
	}
	sort.Strings(apis)
	adir := auth.FindAuthorityDir(m.getenv, m.dir)
	if _, err := os.Stat(filepath.Join(adir, auth.SigningKeyFile)); err != nil {
		return m.errorf("No token authority at %s: run this in the working directory that made the pool", adir)
	}
	a, err := auth.OpenAuthority(adir)
	if err != nil {
		return m.fail("Cannot open the token authority", err)
	}
	tok, _, err := a.Issue("prometheus", []auth.Scope{auth.SeaRead}, *lifetime)
	if err != nil {
		return m.fail("Cannot create the token", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return m.fail("Cannot create -out", err)
	}
	var ca []byte
	if p := auth.FindCA(m.getenv, m.dir); p != "" {
		if ca, err = os.ReadFile(p); err != nil {
			return m.fail("Cannot read the sea's CA", err)
		}
	}
	targets, _ := json.MarshalIndent([]map[string]any{{"targets": apis, "labels": map[string]string{"pool": *pool}}}, "", "  ")
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{metricsTokenFile, []byte(tok + "\n"), 0o600},
		{metricsTargetsFile, append(targets, '\n'), 0o644},
		{metricsConfigFile, []byte(prometheusConfig(dir, *pool, ca != nil)), 0o644},
	}
	if ca != nil {
		files = append(files, struct {
			name string
			data []byte
			mode os.FileMode
		}{metricsCAFile, ca, 0o644})
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		// Written whole at once, 0600 until chmod: the token never lies
		// readable by others, even while it is being written.
		err := atomicfile.Write(p, f.data)
		if err == nil {
			err = os.Chmod(p, f.mode)
		}
		if err != nil {
			return m.fail("Cannot write "+p, err)
		}
		fmt.Fprintf(m.stdout, "Wrote %s\n", p)
	}
	fmt.Fprintf(m.stdout, "\n%d agent(s) of pool %s; the token reads the sea only and expires in %s.\n", len(apis), *pool, *lifetime)
	return 0
}

// prometheusConfig is a sample prometheus.yml scraping a pool's agents
// with the files metricsTargets writes in dir.
func prometheusConfig(dir, pool string, tls bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Scrapes the agents of pool %s (pondctl metrics targets).\nglobal:\n  scrape_interval: 15s\nscrape_configs:\n", pool)
	fmt.Fprintf(&b, "  - job_name: %q\n    metrics_path: /metrics\n", "pond-"+pool)
	if tls {
		fmt.Fprintf(&b, "    scheme: https\n    tls_config:\n      ca_file: %q\n", filepath.Join(dir, metricsCAFile))
	} else {
		b.WriteString("    scheme: http\n")
	}
	fmt.Fprintf(&b, "    authorization:\n      type: Bearer\n      credentials_file: %q\n", filepath.Join(dir, metricsTokenFile))
	fmt.Fprintf(&b, "    file_sd_configs:\n      - files: [%q]\n", filepath.Join(dir, metricsTargetsFile))
	return b.String()
}
