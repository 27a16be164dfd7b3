package factory

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the factory, read from Status at each scrape.
var (
	descGlideins = prometheus.NewDesc("pond_factory_glideins",
		"Glideins of a factory entry now at a stage: queued, running, joined, claimed.",
		[]string{"entry", "stage"}, nil)
	descTotal = prometheus.NewDesc("pond_factory_glideins_total",
		"Glideins of a factory entry that reached a stage: requested, validated, failed, lost, done.",
		[]string{"entry", "stage"}, nil)
	descMatched = prometheus.NewDesc("pond_factory_matched_jobs",
		"Idle jobs the glideins of a factory entry would run, at the last cycle.",
		[]string{"entry"}, nil)
	descWanted = prometheus.NewDesc("pond_factory_wanted_glideins",
		"Glideins a factory entry needs for the idle jobs it matches, at the last cycle.",
		[]string{"entry"}, nil)
	descBreaker = prometheus.NewDesc("pond_factory_breaker_open",
		"1 while a factory entry's circuit breaker stops its submissions.",
		[]string{"entry"}, nil)
	descIdle = prometheus.NewDesc("pond_factory_idle_jobs",
		"Idle jobs of the pool at the factory's last cycle.", nil, nil)
	descLast = prometheus.NewDesc("pond_factory_last_cycle_seconds",
		"When the factory last completed a cycle, in seconds since 1970.", nil, nil)
)

// Describe implements prometheus.Collector.
func (f *Factory) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGlideins, descTotal, descMatched, descWanted, descBreaker, descIdle, descLast} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (f *Factory) Collect(ch chan<- prometheus.Metric) {
	s := f.Status()
	ch <- prometheus.MustNewConstMetric(descIdle, prometheus.GaugeValue, float64(s.IdleJobs))
	if !s.LastCycle.IsZero() {
		ch <- prometheus.MustNewConstMetric(descLast, prometheus.GaugeValue, float64(s.LastCycle.UnixNano())/1e9)
	}
	for _, e := range s.Entries {
		fn := e.Funnel
		for stage, n := range map[string]int{"queued": fn.Queued, "running": fn.Running, "joined": fn.Joined, "claimed": fn.Claimed} {
			ch <- prometheus.MustNewConstMetric(descGlideins, prometheus.GaugeValue, float64(n), e.Name, stage)
		}
		for stage, n := range map[string]int{"requested": fn.Requested, "validated": fn.Validated, "failed": fn.Failed, "lost": fn.Lost, "done": fn.Done} {
			ch <- prometheus.MustNewConstMetric(descTotal, prometheus.CounterValue, float64(n), e.Name, stage)
		}
		ch <- prometheus.MustNewConstMetric(descMatched, prometheus.GaugeValue, float64(e.Matched), e.Name)
		ch <- prometheus.MustNewConstMetric(descWanted, prometheus.GaugeValue, float64(e.Wanted), e.Name)
		open := 0.0
		if e.Breaker.Open {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(descBreaker, prometheus.GaugeValue, open, e.Name)
	}
}
