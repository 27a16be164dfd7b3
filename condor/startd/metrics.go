package startd

import (
	"github.com/prometheus/client_golang/prometheus"
)

var descSlots = prometheus.NewDesc("pond_startd_slots",
	"The startd's slots (static, partitionable and dynamic) by state and activity.",
	[]string{"state", "activity"}, nil)

// Describe implements prometheus.Collector.
func (s *Startd) Describe(ch chan<- *prometheus.Desc) { ch <- descSlots }

// Collect implements prometheus.Collector: the slots as they stand.
func (s *Startd) Collect(ch chan<- prometheus.Metric) {
	type key struct{ state, activity string }
	n := map[key]int{}
	s.mu.Lock()
	for _, sl := range s.slots {
		n[key{sl.state, sl.activity}]++
		for _, c := range sl.children {
			n[key{c.state, c.activity}]++
		}
	}
	s.mu.Unlock()
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(v), k.state, k.activity)
	}
}
