package schedd_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/schedd"
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

// TestBigValueHTCondorClient submits with HTCondor's Python client a job
// with an attribute's value at the limit of one value (1 MiB), which is
// queued whole, and one a byte over it, which Schedd.submit refuses with
// the reason; the queue keeps only the first.
func TestBigValueHTCondorClient(t *testing.T) {
	t.Parallel()
	n := start(t)
	addr := serveCEDAR(t, n.s)
	// The value sent is the string's literal: its characters and quotes.
	at := schedd.MaxAttrValue - 2
	got := wheel(t, addr, fmt.Sprintf(`
def sub(size):
    return htcondor2.Submit({'executable': '/bin/true', 'hold': 'true', 'MY.Big': '"' + 'x' * size + '"'})
OUT['first'] = SCHEDD.submit(sub(%d)).cluster()
try:
    SCHEDD.submit(sub(%d))
    OUT['err'] = ''
except Exception as e:
    OUT['err'] = '%%s: %%s' %% (type(e).__name__, e)
OUT['queued'] = ['%%d:%%d' %% (a['ClusterId'], len(a['Big'])) for a in SCHEDD.query(projection=['ClusterId', 'Big'])]
`, at, at+1))
	if err := fmt.Sprint(got["err"]); !strings.HasPrefix(err, "HTCondorException: ") || !strings.Contains(err, fmt.Sprintf("limit %d", schedd.MaxAttrValue)) {
		t.Errorf("the submit of a value over the limit raised %q; want an HTCondorException naming the limit", err)
	}
	t.Logf("%s", got["err"])
	want := fmt.Sprintf("[%v:%d]", got["first"], at)
	if q := fmt.Sprint(got["queued"]); q != want {
		t.Errorf("queue after the refused submit: %s; want %s", q, want)
	}
}
