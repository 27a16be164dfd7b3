package tree

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pond-htc/pond/overlay/api"
)

// TestMetricsQueries: each query a server runs as root is timed, its
// answer's completeness recorded, and a failed one counted.
func TestMetricsQueries(t *testing.T) {
	m := newQueryMetrics()
	m.observe(20*time.Millisecond, &api.Answer{Stats: api.QueryStats{Completeness: 1}}, nil)
	m.observe(40*time.Millisecond, &api.Answer{Stats: api.QueryStats{Completeness: 0.8}}, nil)
	m.observe(time.Second, nil, errors.New("timed out"))
	s := &Server{metrics: m}
	want := `
# HELP pond_tree_query_completeness Fraction of the members the answers of this node's tree queries spoke for (1 is all).
# TYPE pond_tree_query_completeness histogram
pond_tree_query_completeness_bucket{le="0.5"} 0
pond_tree_query_completeness_bucket{le="0.75"} 0
pond_tree_query_completeness_bucket{le="0.9"} 1
pond_tree_query_completeness_bucket{le="0.95"} 1
pond_tree_query_completeness_bucket{le="0.99"} 1
pond_tree_query_completeness_bucket{le="1"} 2
pond_tree_query_completeness_bucket{le="+Inf"} 2
pond_tree_query_completeness_sum 1.8
pond_tree_query_completeness_count 2
# HELP pond_tree_query_failures_total Tree queries this node ran as their root that failed.
# TYPE pond_tree_query_failures_total counter
pond_tree_query_failures_total 1
`
	if err := testutil.CollectAndCompare(s, strings.NewReader(want), "pond_tree_query_completeness", "pond_tree_query_failures_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(s, "pond_tree_query_seconds"); got != 1 {
		t.Errorf("%d latency histograms", got)
	}
}
