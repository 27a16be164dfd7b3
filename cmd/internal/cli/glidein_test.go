package cli

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers/glidein"
)

// TestGlideinSites: the slurm and ssh providers of this pondctl build
// their sites from their blocks, and a block the site refuses is an error
// with no site, never a nil site inside a non-nil interface; the SSH site
// is closed through io.Closer.
func TestGlideinSites(t *testing.T) {
	dir := t.TempDir()
	sites := glideinSites()
	known, key := filepath.Join(dir, "known_hosts"), filepath.Join(dir, "id")
	if err := os.WriteFile(known, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sshtest.GenerateKey(t, key)
	ssh := func(known, key string) map[string]cty.Value {
		return map[string]cty.Value{"hosts": cty.ListVal([]cty.Value{cty.StringVal("127.0.0.2:22")}),
			"known_hosts_file": cty.StringVal(known), "private_key_file": cty.StringVal(key), "slots_per_host": cty.NumberIntVal(2)}
	}
	for _, tc := range []struct {
		kind   string
		config map[string]cty.Value
		want   string // the error, or "" for a site of kind
	}{
		{glidein.KindSlurm, map[string]cty.Value{"work_dir": cty.StringVal(dir), "partition": cty.StringVal("debug"),
			"time_limit": cty.StringVal("2h"), "commands": cty.MapVal(map[string]cty.Value{"sbatch": cty.StringVal("/opt/slurm/bin/sbatch")})}, ""},
		{glidein.KindSlurm, map[string]cty.Value{"work_dir": cty.StringVal("relative/dir")}, "work_dir \"relative/dir\" must be an absolute path"},
		{glidein.KindSlurm, map[string]cty.Value{"work_dir": cty.StringVal(dir), "partition": cty.StringVal("a b")}, "is not a partition name"},
		{glidein.KindSSH, ssh(known, key), ""},
		{glidein.KindSSH, ssh(filepath.Join(dir, "none"), key), "known_hosts"},
		{glidein.KindSSH, ssh(known, filepath.Join(dir, "nokey")), "nokey"},
		{glidein.KindSSH, map[string]cty.Value{"hosts": cty.ListValEmpty(cty.String)}, "at least one host"},
	} {
		s, err := sites[tc.kind](cty.ObjectVal(tc.config))
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) || s != nil {
				t.Errorf("%s %v: site %v (nil: %t), error %v; want no site and an error containing %q", tc.kind, tc.config, s, s == nil, err, tc.want)
			}
			continue
		}
		if err != nil || s == nil || s.Kind() != tc.kind {
			t.Errorf("%s %v: site %v, error %v", tc.kind, tc.config, s, err)
		}
		if c, ok := s.(io.Closer); ok {
			c.Close()
		}
	}
}

// TestFactoryPools checks which pools' central managers the local
// provider is told run a factory with entries: those a glidein with a
// factory block joins, not those of glideins that keep their own count.
func TestFactoryPools(t *testing.T) {
	src := `pool "campus" {
  nodes = 1
}
pool "other" {
  nodes = 1
}
pool "third" {
  nodes = 1
}
glidein "burst" {
  provider = provider.slurm
  pool     = pool.campus.central_manager
  factory {
    max_queued  = 1
    max_running = 2
  }
}
glidein "more" {
  count    = 2
  provider = provider.slurm
  pool     = pool.third.central_manager
  factory {
    max_queued  = 1
    max_running = 2
  }
}
glidein "fixed" {
  provider = provider.slurm
  pool     = pool.other.central_manager
  nodes    = 2
}
`
	cfg, diags := config.LoadFiles(t.TempDir(), map[string][]byte{"main.pond.hcl": []byte(src)}, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := factoryPools(cfg); !slices.Equal(got, []string{"campus", "third"}) {
		t.Fatalf("factory pools %v, want [campus third]", got)
	}
}
