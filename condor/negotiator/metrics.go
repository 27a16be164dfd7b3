package negotiator

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pond-htc/pond/condor/metrics"
)

// Reasons an idle job the negotiator considered stayed unmatched in a
// cycle (pond_negotiator_rejections_total).
const (
	// RejectConcurrencyLimit: a concurrency limit the job needs was full.
	RejectConcurrencyLimit = "concurrency_limit"
	// RejectNoSlot: no free slot matched the job, or its submitter had
	// used its fair share of the pool.
	RejectNoSlot = "no_slot"
)

// negotiatorMetrics are the negotiator's counters and histograms, counted
// at the end of each cycle (observe).
type negotiatorMetrics struct {
	cycle      prometheus.Histogram
	matches    prometheus.Counter
	rejections *prometheus.CounterVec
}

func newMetrics() *negotiatorMetrics {
	m := &negotiatorMetrics{
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pond_negotiator_cycle_seconds",
			Help: "How long the negotiator's cycles took.", Buckets: metrics.LatencyBuckets}),
		matches: prometheus.NewCounter(prometheus.CounterOpts{Name: "pond_negotiator_matches_total",
			Help: "Jobs the negotiator matched to slots (preemptions included)."}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pond_negotiator_rejections_total",
			Help: "Idle jobs a cycle considered and left unmatched, by reason."}, []string{"reason"}),
	}
	for _, r := range []string{RejectConcurrencyLimit, RejectNoSlot} {
		m.rejections.WithLabelValues(r)
	}
	return m
}

// observe counts a finished cycle: st its statistics, subs the submitters
// and their idle jobs it considered, matches what it matched, blocked the
// jobs each full concurrency limit kept from a match.
func (m *negotiatorMetrics) observe(st CycleStats, subs []Submitter, matches []Match, blocked map[string]int) {
	m.cycle.Observe(st.Duration.Seconds())
	m.matches.Add(float64(len(matches)))
	considered, matched, limited := 0, 0, 0
	for _, s := range subs {
		considered += len(s.Jobs)
	}
	for _, mt := range matches {
		if !mt.Preempt {
			matched++
		}
	}
	for _, n := range blocked {
		limited += n
	}
	unmatched := max(considered-matched, 0)
	limited = min(limited, unmatched)
	m.rejections.WithLabelValues(RejectConcurrencyLimit).Add(float64(limited))
	m.rejections.WithLabelValues(RejectNoSlot).Add(float64(unmatched - limited))
}

var (
	descAutoclusters = prometheus.NewDesc("pond_negotiator_autoclusters",
		"Autoclusters of idle jobs at the negotiator's last cycle.", nil, nil)
	descSubmitters = prometheus.NewDesc("pond_negotiator_submitters",
		"Submitters with idle jobs at the negotiator's last cycle.", nil, nil)
	descIdle = prometheus.NewDesc("pond_negotiator_idle_jobs",
		"Idle jobs the negotiator considered at its last cycle.", nil, nil)
	descSlots = prometheus.NewDesc("pond_negotiator_slots",
		"Unclaimed slots at the negotiator's last cycle.", nil, nil)
	descLastCycle = prometheus.NewDesc("pond_negotiator_last_cycle_timestamp_seconds",
		"When the negotiator's last cycle began, in seconds since 1970.", nil, nil)
	descPriority = prometheus.NewDesc("pond_negotiator_submitter_priority",
		"Effective user priority of each submitter, lower is better (past the first "+strconv.Itoa(metrics.MaxOwners)+
			" by priority, the others' mean as \"other\").",
		[]string{"submitter"}, nil)
	descGroupQuota = prometheus.NewDesc("pond_negotiator_group_quota",
		"Effective quota of each accounting group (GROUP_NAMES) at the negotiator's last cycle, in slot weights (cpus).",
		[]string{"group"}, nil)
	descGroupUsage = prometheus.NewDesc("pond_negotiator_group_usage",
		"Slot weight (cpus) each accounting group's claims held at the negotiator's last cycle, its matches included.",
		[]string{"group"}, nil)
	descGroupRequested = prometheus.NewDesc("pond_negotiator_group_requested",
		"Slot weight (cpus) each accounting group ran and asked for at the negotiator's last cycle.",
		[]string{"group"}, nil)
)

// Describe implements prometheus.Collector.
func (n *Negotiator) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAutoclusters, descSubmitters, descIdle, descSlots, descLastCycle, descPriority,
		descGroupQuota, descGroupUsage, descGroupRequested} {
		ch <- d
	}
	n.metrics.cycle.Describe(ch)
	n.metrics.matches.Describe(ch)
	n.metrics.rejections.Describe(ch)
}

// Collect implements prometheus.Collector: the last cycle's statistics
// and the submitters' priorities as they stand.
func (n *Negotiator) Collect(ch chan<- prometheus.Metric) {
	st := n.LastCycle()
	ch <- prometheus.MustNewConstMetric(descAutoclusters, prometheus.GaugeValue, float64(st.Autoclusters))
	ch <- prometheus.MustNewConstMetric(descSubmitters, prometheus.GaugeValue, float64(st.Submitters))
	ch <- prometheus.MustNewConstMetric(descIdle, prometheus.GaugeValue, float64(st.IdleJobs))
	ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(st.Slots))
	if !st.Start.IsZero() {
		ch <- prometheus.MustNewConstMetric(descLastCycle, prometheus.GaugeValue, float64(st.Start.UnixNano())/1e9)
	}
	prios := n.Priorities()
	if len(prios) > metrics.MaxOwners {
		// The submitters with the most usage (the worst priorities) by
		// name; the others' priorities would add up to nothing useful,
		// so "other" is their mean.
		top := metrics.Top(prios, metrics.MaxOwners)
		if sum, ok := top[metrics.Other]; ok {
			top[metrics.Other] = sum / float64(len(prios)-metrics.MaxOwners)
		}
		prios = top
	}
	for name, p := range prios {
		ch <- prometheus.MustNewConstMetric(descPriority, prometheus.GaugeValue, p, name)
	}
	for _, g := range n.Groups() {
		ch <- prometheus.MustNewConstMetric(descGroupQuota, prometheus.GaugeValue, g.Quota, g.Name)
		ch <- prometheus.MustNewConstMetric(descGroupUsage, prometheus.GaugeValue, g.Usage, g.Name)
		ch <- prometheus.MustNewConstMetric(descGroupRequested, prometheus.GaugeValue, g.Requested, g.Name)
	}
	n.metrics.cycle.Collect(ch)
	n.metrics.matches.Collect(ch)
	n.metrics.rejections.Collect(ch)
}
