package schedd_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestQueueLimitsReasonHTCondorClient submits with HTCondor's Python
// client over each queue limit, with the queue already at it (refused at
// NewCluster) and with the submit taking it over (refused at the commit,
// NewProc's answer having no room for a reason): Schedd.submit raises
// with the reason pondctl condor submit prints, and the queue keeps only
// the jobs submitted within the limit.
func TestQueueLimitsReasonHTCondorClient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		knob        string
		value       int
		first, then int // the jobs of a submit within the limit, then of one over it
	}{
		{"MAX_JOBS_PER_OWNER", 3, 3, 1},
		{"MAX_JOBS_PER_OWNER", 3, 2, 2},
		{"MAX_JOBS_SUBMITTED", 3, 3, 2},
		{"MAX_JOBS_SUBMITTED", 3, 1, 3},
		{"MAX_JOBS_PER_SUBMISSION", 4, 2, 5},
	} {
		t.Run(fmt.Sprintf("%s=%d,%d+%d", tc.knob, tc.value, tc.first, tc.then), func(t *testing.T) {
			n := startWith(t, fmt.Sprintf("%s = %d\n", tc.knob, tc.value))
			addr := serveCEDAR(t, n.s)
			got := wheel(t, addr, fmt.Sprintf(`
sub = htcondor2.Submit({'executable': '/bin/true', 'hold': 'true'})
OUT['first'] = SCHEDD.submit(sub, count=%d).num_procs()
try:
    SCHEDD.submit(sub, count=%d)
    OUT['err'] = ''
except Exception as e:
    OUT['err'] = '%%s: %%s' %% (type(e).__name__, e)
OUT['queued'] = len(SCHEDD.query(projection=['ProcId']))
`, tc.first, tc.then))
			if got["first"] != float64(tc.first) {
				t.Fatalf("the submit within %s: %v", tc.knob, got)
			}
			want := "Number of submitted jobs would exceed " + tc.knob
			if err := fmt.Sprint(got["err"]); !strings.HasPrefix(err, "HTCondorException: ") || !strings.Contains(err, want) {
				t.Errorf("the submit over %s raised %q; want an HTCondorException with %q", tc.knob, err, want)
			}
			t.Logf("%s", got["err"])
			if got["queued"] != float64(tc.first) {
				t.Errorf("%v jobs queued after the refused submit; want %d", got["queued"], tc.first)
			}
		})
	}
}
