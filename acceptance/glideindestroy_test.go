package acceptance

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/testenv"
)

// TestGlideinDestroyAfterSiteCheckFails applies glideins on a Slurm
// partition, then names a partition the cluster does not have (as when
// the partition was removed since): a plan fails, saying so, but destroy
// cancels the glideins by what the state holds and leaves the site empty.
func TestGlideinDestroyAfterSiteCheckFails(t *testing.T) {
	t.Parallel()
	start := glideinSites["slurm"]
	if start == nil {
		testenv.SkipOrFail(t, "the slurm site is not built in")
	}
	s := start(t)
	w := newWorkdir(t, "")
	w.env = append(w.env, s.env...)
	main := `
pond {
  backend "local" { path = "pond.state" }
}

provider "local" {}

%s

pool "campus" {
  provider = provider.local
  nodes    = 1
}

glidein "g" {
  provider = provider.slurm
  pool     = pool.campus.central_manager
  nodes    = 2
  lifetime = "30m"
}
`
	w.write("main.pond.hcl", fmt.Sprintf(main, s.provider))
	w.expect(0, "apply", "-auto-approve")
	if got := s.running(t); len(got) != 2 {
		t.Fatalf("after apply the site runs %v, want 2 glideins", got)
	}
	gone := strings.Replace(s.provider, "partition", `partition = "gone"
  # was:`, 1)
	w.write("main.pond.hcl", fmt.Sprintf(main, gone))
	if r := w.expect(1, "plan"); !strings.Contains(r.stderr, `"gone"`) {
		t.Fatalf("the plan's error does not name the partition:\n%s", r.stderr)
	}
	r := w.expect(0, "destroy", "-auto-approve")
	if got := s.running(t); len(got) != 0 {
		t.Fatalf("after destroy the site runs %v\n%s%s", got, r.stdout, r.stderr)
	}
}
