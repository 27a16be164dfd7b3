package relay

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pond-htc/pond/condor/auth"
)

// TestMetricsTunnels: the relay's metrics count its workers, their
// tunnels and the bytes that crossed them each way.
func TestMetricsTunnels(t *testing.T) {
	r, relayAddr, mint := testRelay(t, Config{Name: "cm"})
	tok := mint(time.Hour, "node/w1", auth.Daemon)
	c, err := Connect(t.Context(), &Dialer{Relay: relayAddr, Name: "w1", Token: func() string { return tok }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	serveHTTP(t, c.API())
	conn, err := net.Dial("tcp", c.Addrs().API)
	if err != nil {
		t.Fatal(err)
	}
	req := "GET / HTTP/1.0\r\n\r\n"
	fmt.Fprint(conn, req)
	body, _ := io.ReadAll(conn)
	conn.Close()
	if len(body) == 0 {
		t.Fatal("no answer through the tunnel")
	}
	// The relay counts a stream once it has ended.
	deadline := time.Now().Add(5 * time.Second)
	for r.bytes.fromWorker.Load() < uint64(len(body)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	want := fmt.Sprintf(`
# HELP pond_relay_bytes_total Bytes the relay carried through its workers' tunnels, by direction (to_worker, from_worker).
# TYPE pond_relay_bytes_total counter
pond_relay_bytes_total{direction="from_worker"} %d
pond_relay_bytes_total{direction="to_worker"} %d
# HELP pond_relay_tunnels Workers whose tunnel to the relay is up.
# TYPE pond_relay_tunnels gauge
pond_relay_tunnels 1
# HELP pond_relay_workers Workers the relay holds addresses for.
# TYPE pond_relay_workers gauge
pond_relay_workers 1
`, len(body), len(req))
	if err := testutil.CollectAndCompare(r, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
