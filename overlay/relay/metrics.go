package relay

import (
	"io"
	"net"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// byteCounts counts the bytes the relay carried through its workers'
// tunnels, each way; the zero value is ready.
type byteCounts struct{ toWorker, fromWorker atomic.Uint64 }

// splice copies between outside (a connection of the relay's) and st (a
// stream of a worker's tunnel) both ways, as splice does, counting the
// bytes in n.
func (n *byteCounts) splice(outside, st net.Conn) {
	splice(countingConn{outside, &n.toWorker}, countingConn{st, &n.fromWorker})
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Uint64
}

func (c countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(uint64(k))
	return k, err
}

// CloseWrite half-closes the connection where it allows it (splice).
func (c countingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

var _ io.Reader = countingConn{}

var (
	descWorkers = prometheus.NewDesc("pond_relay_workers",
		"Workers the relay holds addresses for.", nil, nil)
	descTunnels = prometheus.NewDesc("pond_relay_tunnels",
		"Workers whose tunnel to the relay is up.", nil, nil)
	descBytes = prometheus.NewDesc("pond_relay_bytes_total",
		"Bytes the relay carried through its workers' tunnels, by direction (to_worker, from_worker).", []string{"direction"}, nil)
)

// Describe implements prometheus.Collector.
func (r *Relay) Describe(ch chan<- *prometheus.Desc) {
	ch <- descWorkers
	ch <- descTunnels
	ch <- descBytes
}

// Collect implements prometheus.Collector.
func (r *Relay) Collect(ch chan<- prometheus.Metric) {
	ws := r.Workers()
	up := 0
	for _, w := range ws {
		if w.Connected {
			up++
		}
	}
	ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(len(ws)))
	ch <- prometheus.MustNewConstMetric(descTunnels, prometheus.GaugeValue, float64(up))
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(r.bytes.toWorker.Load()), "to_worker")
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(r.bytes.fromWorker.Load()), "from_worker")
}
