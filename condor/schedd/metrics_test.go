package schedd_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/metrics"
)

// TestMetricsJobs: the schedd's metrics count its queue's jobs by state
// and owner as the queue holds them, its submits, and its commits.
func TestMetricsJobs(t *testing.T) {
	t.Parallel()
	n := start(t)
	n.submitFile("alice", threeJobs)
	n.submitFile("bob", threeJobs)
	if _, err := n.s.Queue().Hold(context.Background(), jobqueue.Selector{Owner: "bob"}, "test", 0, 0); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP pond_schedd_jobs Jobs in the schedd's queue by state and owner (the 20 owners with most jobs by name, the others as "other").
# TYPE pond_schedd_jobs gauge
pond_schedd_jobs{owner="alice",state="Idle"} 3
pond_schedd_jobs{owner="bob",state="Held"} 3
# HELP pond_schedd_submitted_jobs_total Jobs submitted to the schedd (a retried submission counts once).
# TYPE pond_schedd_submitted_jobs_total counter
pond_schedd_submitted_jobs_total 6
# HELP pond_schedd_claims Slots the schedd holds claims on, idle or running a job.
# TYPE pond_schedd_claims gauge
pond_schedd_claims 0
`
	if err := testutil.CollectAndCompare(n.s, strings.NewReader(want), "pond_schedd_jobs", "pond_schedd_submitted_jobs_total", "pond_schedd_claims"); err != nil {
		t.Error(err)
	}
	// Each submission commits at least its reservation and its jobs.
	if c := testutil.CollectAndCount(n.s, "pond_schedd_queue_commit_seconds"); c != 1 {
		t.Errorf("%d commit histograms, want 1", c)
	}
}

// TestMetricsOwnersBounded: a queue with more owners than metrics.MaxOwners
// names that many and adds up the rest as "other".
func TestMetricsOwnersBounded(t *testing.T) {
	t.Parallel()
	n := start(t)
	for i := range metrics.MaxOwners + 3 {
		n.submitFile(fmt.Sprintf("user%02d", i), "executable = /bin/echo\nqueue 1\n")
	}
	n.submitFile("heavy", threeJobs)
	got := testutil.CollectAndCount(n.s, "pond_schedd_jobs")
	if got != metrics.MaxOwners+1 {
		t.Errorf("%d pond_schedd_jobs series, want %d", got, metrics.MaxOwners+1)
	}
	body, err := testutil.CollectAndFormat(n.s, expfmt.TypeTextPlain, "pond_schedd_jobs")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`pond_schedd_jobs{owner="heavy",state="Idle"} 3`, `pond_schedd_jobs{owner="other",state="Idle"} 4`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
}

// BenchmarkMetricsScrape: the CPU a scrape of the schedd's metrics costs
// (gathered and printed in Prometheus's text format, as /metrics serves
// it) with a queue of idle jobs of 100 owners: it reads the counts the
// queue's triggers keep, so it costs as much at 50,000 jobs as at 1,000.
func BenchmarkMetricsScrape(b *testing.B) {
	for _, size := range benchQueueSizes() {
		b.Run(fmt.Sprintf("queued=%d", size), func(b *testing.B) {
			n := start(b)
			for i := range 100 {
				left := size / 100
				for left > 0 {
					c := min(left, 10000)
					n.submitFile(fmt.Sprintf("user%03d", i), idleFile(c))
					left -= c
				}
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(n.s)
			start := cpuTime(b)
			for b.Loop() {
				mfs, err := reg.Gather()
				if err != nil {
					b.Fatal(err)
				}
				enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
				for _, mf := range mfs {
					if err := enc.Encode(mf); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N)/1e6, "cpu-ms/scrape")
		})
	}
}
