package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	descRestarts = prometheus.NewDesc("pond_daemon_restarts_total",
		"Times the master restarted a daemon after it failed.", []string{"daemon"}, nil)
	descUp = prometheus.NewDesc("pond_daemon_up",
		"1 for each daemon the node runs now.", []string{"daemon"}, nil)
)

// Describe implements prometheus.Collector. It describes nothing in
// advance (an unchecked collector): which daemons run, and so which
// metrics there are, changes with the node's role and its reconfigs.
func (m *Master) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: the metrics of the daemons
// running at the scrape (each a prometheus.Collector), so that a daemon
// restarted or started by a reconfig shows at once, and the restarts.
func (m *Master) Collect(ch chan<- prometheus.Metric) {
	for _, name := range m.Daemons() {
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(m.Restarts(name)), name)
		r := m.running(name)
		if r == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1, name)
		if c, ok := r.(prometheus.Collector); ok {
			c.Collect(ch)
		}
	}
}
