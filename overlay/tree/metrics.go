package tree

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pond-htc/pond/condor/metrics"
	"github.com/pond-htc/pond/overlay/api"
)

// queryMetrics count the tree queries a Server ran as their root.
type queryMetrics struct {
	latency  prometheus.Histogram
	coverage prometheus.Histogram
	failures prometheus.Counter
}

func newQueryMetrics() *queryMetrics {
	return &queryMetrics{
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pond_tree_query_seconds",
			Help: "How long the tree queries this node ran as their root took.", Buckets: metrics.LatencyBuckets}),
		coverage: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pond_tree_query_completeness",
			Help:    "Fraction of the members the answers of this node's tree queries spoke for (1 is all).",
			Buckets: []float64{.5, .75, .9, .95, .99, 1}}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "pond_tree_query_failures_total",
			Help: "Tree queries this node ran as their root that failed."}),
	}
}

// observe counts a query that took d and answered a (nil: it failed).
func (m *queryMetrics) observe(d time.Duration, a *api.Answer, err error) {
	m.latency.Observe(d.Seconds())
	if err != nil || a == nil {
		m.failures.Inc()
		return
	}
	m.coverage.Observe(a.Stats.Completeness)
}

// Describe implements prometheus.Collector.
func (s *Server) Describe(ch chan<- *prometheus.Desc) {
	s.metrics.latency.Describe(ch)
	s.metrics.coverage.Describe(ch)
	s.metrics.failures.Describe(ch)
}

// Collect implements prometheus.Collector.
func (s *Server) Collect(ch chan<- prometheus.Metric) {
	s.metrics.latency.Collect(ch)
	s.metrics.coverage.Collect(ch)
	s.metrics.failures.Collect(ch)
}
