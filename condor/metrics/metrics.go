// Package metrics holds what the pond daemons and the agent share to
// expose Prometheus metrics: the registry every agent serves at /metrics
// (Go runtime and process metrics included), the bounding of label values
// (owners, ad types) so that a big pool cannot blow up a scrape, the
// expiry of credentials, and the buckets of latency histograms.
//
// The daemons' own collectors (condor/schedd, condor/negotiator, ...) read
// their current state at scrape time; counters and histograms are counted
// where the event happens. All metric names start with "pond_".
package metrics

import (
	"cmp"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pond-htc/pond/condor/auth"
)

// NewRegistry returns a registry with the Go runtime's and the process's
// metrics (go_*, process_*), for an agent to register its collectors in.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// MaxOwners bounds the owners (or submitters) a metric names one by one:
// the others are added up under Other.
const MaxOwners = 20

// Other is the label value of the owners (or types) past the bound.
const Other = "other"

// Top keeps the n keys of counts with the largest values (ties by name)
// and adds up the rest under Other: a label with at most n+1 values
// however many owners a queue has.
func Top(counts map[string]float64, n int) map[string]float64 {
	if len(counts) <= n {
		return counts
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	out := make(map[string]float64, n+1)
	for i, k := range keys {
		if i < n {
			out[k] = counts[k]
		} else {
			out[Other] += counts[k]
		}
	}
	return out
}

// Known returns v when it is one of values (compared exactly), Other
// otherwise: for label values a caller chooses, such as an ad's type.
func Known(v string, values ...string) string {
	if slices.Contains(values, v) {
		return v
	}
	return Other
}

// LatencyBuckets are the buckets of the latency histograms, in seconds:
// from a millisecond to a minute.
var LatencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Credential is a credential whose expiry an agent shows: Expiry returns
// when it expires, or an error when it cannot be read now; ok is false
// for a credential the agent does not have.
type Credential struct {
	Kind   string
	Expiry func() (t time.Time, ok bool, err error)
}

var descExpiry = prometheus.NewDesc("pond_credential_expiry_timestamp_seconds",
	"When a credential of the agent expires, in seconds since 1970: the node token, the TLS certificate, the pilot factory's delegated CA.",
	[]string{"kind"}, nil)

var descExpiryErrors = prometheus.NewDesc("pond_credential_read_errors",
	"1 when a credential of the agent cannot be read at the scrape (its expiry is then missing).",
	[]string{"kind"}, nil)

// Credentials is a collector of the credentials' expiry, read at each
// scrape so that a renewed token or certificate shows at once.
type Credentials []Credential

// Describe implements prometheus.Collector.
func (c Credentials) Describe(ch chan<- *prometheus.Desc) {
	ch <- descExpiry
	ch <- descExpiryErrors
}

// Collect implements prometheus.Collector.
func (c Credentials) Collect(ch chan<- prometheus.Metric) {
	for _, cr := range c {
		t, ok, err := cr.Expiry()
		failed := 0.0
		if err != nil {
			failed = 1
		} else if ok {
			ch <- prometheus.MustNewConstMetric(descExpiry, prometheus.GaugeValue, float64(t.UnixNano())/1e9, cr.Kind)
		}
		ch <- prometheus.MustNewConstMetric(descExpiryErrors, prometheus.GaugeValue, failed, cr.Kind)
	}
}

// CertificateExpiry returns when the first certificate of the PEM file at
// path expires ("" is no certificate: ok false).
func CertificateExpiry(path string) (time.Time, bool, error) {
	if path == "" {
		return time.Time{}, false, nil
	}
	certs, err := auth.ReadCertificates(path)
	if err != nil {
		return time.Time{}, false, err
	}
	return certs[0].NotAfter, true, nil
}

// Unchecked is a collector that declares no descriptions in advance
// (client_golang's "unchecked" collector): for collectors whose metrics
// depend on which daemons run now.
type Unchecked func(ch chan<- prometheus.Metric)

// Describe implements prometheus.Collector: it describes nothing.
func (Unchecked) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (u Unchecked) Collect(ch chan<- prometheus.Metric) { u(ch) }
