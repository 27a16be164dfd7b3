package schedd

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/metrics"
)

// scheddMetrics are the schedd's counters and histograms, counted as
// things happen; the rest of its metrics are read at each scrape
// (Collect).
type scheddMetrics struct {
	submits, starts, deferrals prometheus.Counter
	commit                     prometheus.Histogram
}

func newMetrics() *scheddMetrics {
	return &scheddMetrics{
		submits: prometheus.NewCounter(prometheus.CounterOpts{Name: "pond_schedd_submitted_jobs_total",
			Help: "Jobs submitted to the schedd (a retried submission counts once)."}),
		starts: prometheus.NewCounter(prometheus.CounterOpts{Name: "pond_schedd_job_starts_total",
			Help: "Jobs the schedd started on a slot or ran itself."}),
		deferrals: prometheus.NewCounter(prometheus.CounterOpts{Name: "pond_schedd_deferred_matches_total",
			Help: "Matches the schedd left for a later cycle because its shadows' queue was full (their jobs stayed idle)."}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pond_schedd_queue_commit_seconds",
			Help: "How long the job queue database's write transactions took to commit.", Buckets: metrics.LatencyBuckets}),
	}
}

// submitted counts n jobs submitted; started, a job started. Both
// count nothing on a schedd made without New (a test's).
func (m *scheddMetrics) submitted(n int) {
	if m != nil {
		m.submits.Add(float64(n))
	}
}

func (m *scheddMetrics) started() {
	if m != nil {
		m.starts.Inc()
	}
}

// deferred counts n matches left for a later cycle.
func (m *scheddMetrics) deferred(n int) {
	if m != nil {
		m.deferrals.Add(float64(n))
	}
}

var (
	descJobs = prometheus.NewDesc("pond_schedd_jobs",
		"Jobs in the schedd's queue by state and owner (the "+strconv.Itoa(metrics.MaxOwners)+" owners with most jobs by name, the others as \"other\").",
		[]string{"state", "owner"}, nil)
	descShadows = prometheus.NewDesc("pond_schedd_running_shadows",
		"Jobs the schedd is starting or running on slots (its shadows).", nil, nil)
	descStarting = prometheus.NewDesc("pond_schedd_starting_shadows",
		"Matched jobs whose shadows are claiming their slot and starting the job (64 at once) or waiting their turn to (1,024 at most; past it, matches are left for a later cycle).", nil, nil)
	descClaims = prometheus.NewDesc("pond_schedd_claims",
		"Slots the schedd holds claims on, idle or running a job.", nil, nil)
	descQueueBytes = prometheus.NewDesc("pond_schedd_queue_database_bytes",
		"Size of the job queue database on disk, its write-ahead log included.", nil, nil)
	descScrapeErr = prometheus.NewDesc("pond_schedd_scrape_errors",
		"1 when the schedd's job counts could not be read at this scrape.", nil, nil)
)

// Describe implements prometheus.Collector.
func (s *Schedd) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descShadows, descStarting, descClaims, descQueueBytes, descScrapeErr} {
		ch <- d
	}
	s.metrics.submits.Describe(ch)
	s.metrics.starts.Describe(ch)
	s.metrics.deferrals.Describe(ch)
	s.metrics.commit.Describe(ch)
}

// Collect implements prometheus.Collector. The job counts come from the
// counts the queue's triggers keep (jobqueue.Queue.CountsByOwner): a
// scrape costs as much with a million jobs as with ten.
func (s *Schedd) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	failed := 0.0
	counts, err := s.q.CountsByOwner(ctx)
	if err != nil {
		failed = 1
	} else {
		for state, owners := range jobsByState(counts) {
			for owner, n := range metrics.Top(owners, metrics.MaxOwners) {
				ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, n, state, owner)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(descScrapeErr, prometheus.GaugeValue, failed)
	s.mu.Lock()
	shadows, starting, claims := len(s.active), s.starting, len(s.claims)
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descShadows, prometheus.GaugeValue, float64(shadows))
	ch <- prometheus.MustNewConstMetric(descStarting, prometheus.GaugeValue, float64(starting))
	ch <- prometheus.MustNewConstMetric(descClaims, prometheus.GaugeValue, float64(claims))
	var size int64
	for _, p := range []string{s.q.Path(), s.q.Path() + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			size += fi.Size()
		}
	}
	ch <- prometheus.MustNewConstMetric(descQueueBytes, prometheus.GaugeValue, float64(size))
	s.metrics.submits.Collect(ch)
	s.metrics.starts.Collect(ch)
	s.metrics.deferrals.Collect(ch)
	s.metrics.commit.Collect(ch)
}

// jobsByState turns the queue's counts by owner into counts by state
// name, then owner.
func jobsByState(counts map[string]map[jobqueue.Status]int) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for owner, byStatus := range counts {
		for st, n := range byStatus {
			m := out[st.String()]
			if m == nil {
				m = map[string]float64{}
				out[st.String()] = m
			}
			m[owner] += float64(n)
		}
	}
	return out
}
