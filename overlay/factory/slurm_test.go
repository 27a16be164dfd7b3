package factory_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/slurm"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
)

// TestFactorySlurm is TestFactorySSH on a real Slurm cluster of two
// nodes: the factory's glideins are batch jobs, and the one killed behind
// its back is cancelled with scancel.
func TestFactorySlurm(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t, 2)
	site, err := slurm.New(slurm.Config{Env: c.Env(), WorkDir: filepath.Join(t.TempDir(), "work")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		gs, _ := site.List(context.Background(), glidein.IDPrefix)
		for _, g := range gs {
			site.Cancel(context.Background(), g.ID)
		}
	})
	scenario(t, site, func(g glidein.Glidein) error {
		c.Run(t, "scancel", g.SiteID)
		return nil
	})
}
