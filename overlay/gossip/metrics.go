package gossip

import (
	"github.com/hashicorp/serf/serf"
	"github.com/prometheus/client_golang/prometheus"
)

// rttBuckets are the buckets of the round-trip estimates, in seconds.
var rttBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

var (
	descMembers = prometheus.NewDesc("pond_gossip_members",
		"Members of the sea this node knows of, by status (alive, leaving, left, failed).", []string{"status"}, nil)
	descRTT = prometheus.NewDesc("pond_gossip_rtt_seconds",
		"Round trips from this node to the other alive members, estimated from serf's network coordinates at the scrape.", nil, nil)
	descHealth = prometheus.NewDesc("pond_gossip_health_score",
		"memberlist's awareness of this node's own health: 0 is healthy; it rises as the node's probes fail or go unanswered.", nil, nil)
	descFailures = prometheus.NewDesc("pond_gossip_member_failures_total",
		"Members this node saw fail their probes (serf's member-failed events).", nil, nil)
)

// countEvent counts the member failures of a serf event.
func (s *Sea) countEvent(ev serf.Event) {
	if me, ok := ev.(serf.MemberEvent); ok && me.Type == serf.EventMemberFailed {
		s.failures.Add(uint64(len(me.Members)))
	}
}

// Describe implements prometheus.Collector.
func (s *Sea) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMembers, descRTT, descHealth, descFailures} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the members as this node sees
// them now.
func (s *Sea) Collect(ch chan<- prometheus.Metric) {
	inst := s.Serf()
	byStatus := map[string]float64{"alive": 0, "leaving": 0, "left": 0, "failed": 0}
	local, cerr := inst.GetCoordinate()
	self := inst.LocalMember().Name
	counts := make([]uint64, len(rttBuckets))
	var n uint64
	var sum float64
	for _, m := range inst.Members() {
		byStatus[m.Status.String()]++
		if m.Status != serf.StatusAlive || m.Name == self || cerr != nil {
			continue
		}
		c, ok := inst.GetCachedCoordinate(m.Name)
		if !ok || c == nil {
			continue
		}
		rtt := local.DistanceTo(c).Seconds()
		n++
		sum += rtt
		for i, b := range rttBuckets {
			if rtt <= b {
				counts[i]++
			}
		}
	}
	for st, v := range byStatus {
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, v, st)
	}
	buckets := make(map[float64]uint64, len(rttBuckets))
	for i, b := range rttBuckets {
		buckets[b] = counts[i]
	}
	ch <- prometheus.MustNewConstHistogram(descRTT, n, sum, buckets)
	ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, float64(inst.Memberlist().GetHealthScore()))
	ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(s.failures.Load()))
}
