package schedd

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// submitCluster queues a cluster of n idle jobs (that match nothing) on s
// and returns its number.
func submitCluster(t testing.TB, s *Schedd, n int) int {
	t.Helper()
	f, err := submit.Parse(filepath.Join(t.TempDir(), "job.sub"),
		fmt.Appendf(nil, "executable = /bin/true\narguments = $(Process)\nrequirements = false\nqueue %d\n", n))
	if err != nil {
		t.Fatal(err)
	}
	req := digestRequest(t, s, f, time.Now())
	if _, err := s.SubmitDigest(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	return req.Cluster
}

// TestActClusterMemory holds, releases and removes one large cluster: the
// schedd's heap meanwhile does not grow with the number of jobs acted on.
func TestActClusterMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster of 20,000 jobs")
	}
	ctx := context.Background()
	peak := map[string]map[int]uint64{}
	for _, n := range []int{1000, 20000} {
		s := scheddAt(t, t.TempDir(), "")
		t.Cleanup(func() { s.Close() })
		c := submitCluster(t, s, n)
		for _, action := range []string{wire.ActHold, wire.ActRelease, wire.ActRemove} {
			var resp *wire.ActResponse
			start := time.Now()
			p := peakHeap(func() {
				var err error
				resp, err = s.Act(ctx, &wire.ActRequest{Action: action, Args: []string{fmt.Sprint(c)}})
				if err != nil {
					t.Fatal(err)
				}
			})
			if peak[action] == nil {
				peak[action] = map[int]uint64{}
			}
			peak[action][n] = p
			t.Logf("%s of %d jobs: %v, peak heap %.1f MiB over the schedd's before", action, n, time.Since(start).Round(time.Millisecond), float64(p)/(1<<20))
			if got := actCount(resp); got != n {
				t.Fatalf("%s changed %d jobs, want %d", action, got, n)
			}
		}
	}
	for action, p := range peak {
		if grew := int64(p[20000]) - int64(p[1000]); grew > 12<<20 {
			t.Errorf("%s: the peak heap grew by %.1f MiB from 1,000 to 20,000 jobs, want it flat", action, float64(grew)/(1<<20))
		}
	}
}

func actCount(resp *wire.ActResponse) int { return resp.Count }
