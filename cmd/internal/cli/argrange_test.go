package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/planner/funcs"
)

// TestProviderErrorsAtTheirArgument plans configurations that a provider
// refuses for one argument: each error's range is that argument's value
// (file:line:col), not the block's. A partition a real Slurm cluster does
// not have is an argument of the provider block.
func TestProviderErrorsAtTheirArgument(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   string
		slurm bool
		want  string // in the error's detail
		at    string // main.pond.hcl:LINE:COL
	}{
		{"sea_query requirements", `data "sea_query" "q" {
  sea          = "127.0.0.1:1"
  requirements = "HasGPU == == true"
}
`, false, "requirements: ", "main.pond.hcl:3:18"},
		{"sea_query constant requirements", `data "sea_query" "q" {
  sea          = "127.0.0.1:1"
  requirements = "42"
}
`, false, "not a boolean ClassAd expression", "main.pond.hcl:3:18"},
		{"pond rank", `pond "p" {
  central_manager = "127.0.0.1:9618"
  requirements    = "true"
  rank            = "Memory +"
  size            = 1
}
`, false, "rank: ", "main.pond.hcl:4:21"},
		{"pool nodes = 0", `pool "a" {
  slots = 1
  nodes = 0
}
`, false, "nodes: must be at least 1, got 0", "main.pond.hcl:3:11"},
		{"pool slots = 0", `pool "a" {
  slots = 0
}
`, false, "slots: must be at least 1, got 0", "main.pond.hcl:2:11"},
		{"pool replicas", `pool "a" {
  nodes    = 2
  replicas = 5
}
`, false, "replicas = 5", "main.pond.hcl:3:14"},
		{"missing Slurm partition", `variable "partition" {
  default = "nosuch"
}

provider "slurm" {
  work_dir     = "%s"
  partition    = var.partition
  bind_address = "127.0.0.1"
}

glidein "hpc" {
  provider = provider.slurm
  pool     = "127.0.0.1:9618"
  nodes    = 1
}
`, true, `partition "nosuch": the cluster has no such partition`, "main.pond.hcl:7:18"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			if tc.slurm {
				c := slurmtest.Start(t, slurmtest.Options{})
				for _, kv := range c.Env() {
					k, v, _ := strings.Cut(kv, "=")
					t.Setenv(k, v)
				}
				src = fmt.Sprintf(src, t.TempDir())
			}
			diags := planDiags(t, src)
			var found []string
			for _, d := range diags {
				if !strings.Contains(d.Detail, tc.want) {
					continue
				}
				at := "no range"
				if d.Subject != nil {
					at = fmt.Sprintf("%s:%d:%d", filepath.Base(d.Subject.Filename), d.Subject.Start.Line, d.Subject.Start.Column)
				}
				if at == tc.at {
					return
				}
				found = append(found, at)
			}
			t.Fatalf("no error saying %q at %s (found at %v) in:\n%v", tc.want, tc.at, found, diags)
		})
	}
}

// planDiags plans src, in a directory of its own, with pondctl's providers
// and returns the plan's diagnostics.
func planDiags(t *testing.T, src string) hcl.Diagnostics {
	t.Helper()
	dir := configDir(t, src)
	cfg, diags := config.LoadDir(dir, loadOptions())
	if diags.HasErrors() {
		t.Fatalf("loading the configuration: %v", diags)
	}
	eng := planner.New(planner.Options{
		Config:        cfg,
		Functions:     funcs.Functions(dir),
		Providers:     providerRegistry(),
		ResourceTypes: resourceTypes,
		DataTypes:     dataTypes,
	})
	defer eng.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, diags = eng.Plan(ctx, nil, planner.PlanOptions{Refresh: true})
	if !diags.HasErrors() {
		t.Fatalf("the plan has no error")
	}
	return diags
}
