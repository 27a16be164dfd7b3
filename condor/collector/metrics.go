package collector

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pond-htc/pond/condor/metrics"
	"github.com/pond-htc/pond/condor/wire"
)

// adTypes are the ad types the collector's metrics name; the others (any
// type an advertiser makes up) are counted as metrics.Other.
var adTypes = []string{wire.TypeMachine, wire.TypeSchedd, wire.TypeSubmitter, wire.TypeNegotiator, wire.TypeMaster,
	typeStartDaemon, "Collector", "Generic", "Grid", "License", "Accounting"}

// typeLabel is the label value of an ad type, bounded to adTypes.
func typeLabel(typ string) string {
	for _, t := range adTypes {
		if strings.EqualFold(t, typ) {
			return t
		}
	}
	return metrics.Other
}

// updateCounts counts the updates the collector took, by ad type; its
// zero value is ready.
type updateCounts struct {
	once sync.Once
	n    map[string]*atomic.Uint64
}

func (u *updateCounts) init() {
	u.once.Do(func() {
		u.n = make(map[string]*atomic.Uint64, len(adTypes)+1)
		for _, t := range append(adTypes[:len(adTypes):len(adTypes)], metrics.Other) {
			u.n[t] = new(atomic.Uint64)
		}
	})
}

// count counts an update of ads of type typ.
func (u *updateCounts) count(typ string) {
	u.init()
	u.n[typeLabel(typ)].Add(1)
}

var (
	descAds = prometheus.NewDesc("pond_collector_ads",
		"Ads the collector holds (not yet expired) by type.", []string{"type"}, nil)
	descUpdates = prometheus.NewDesc("pond_collector_updates_total",
		"Updates the collector took, by ad type.", []string{"type"}, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAds
	ch <- descUpdates
}

// Collect implements prometheus.Collector: the ads held now, counted
// without copying them, and the updates so far.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := c.opts.Now()
	n := map[string]int{}
	c.mu.RLock()
	for typ, bySource := range c.ads {
		label := typeLabel(typ)
		for _, entries := range bySource {
			for _, e := range entries {
				if e.expires.After(now) {
					n[label]++
				}
			}
		}
	}
	c.mu.RUnlock()
	for typ, v := range n {
		ch <- prometheus.MustNewConstMetric(descAds, prometheus.GaugeValue, float64(v), typ)
	}
	c.updates.init()
	for typ, v := range c.updates.n {
		if x := v.Load(); x > 0 {
			ch <- prometheus.MustNewConstMetric(descUpdates, prometheus.CounterValue, float64(x), typ)
		}
	}
}
