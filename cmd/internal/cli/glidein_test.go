package cli

import (
	"slices"
	"testing"

	"github.com/pond-htc/pond/planner/config"
)

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
