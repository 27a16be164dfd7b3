package tree

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// BenchmarkTCPQuery measures k=10 best-rank queries over n in-process
// engines on loopback TCP, from rotating roots, and reports p50/p99 query
// latency and messages per query. -short runs the 64 engines only.
func BenchmarkTCPQuery(b *testing.B) {
	for _, n := range []int{64, 256, 512} {
		for _, redundant := range []bool{false, true} {
			if n > 64 && testing.Short() {
				continue
			}
			b.Run(fmt.Sprintf("n=%d/redundant=%v", n, redundant), func(b *testing.B) {
				benchQuery(b, newTCPSea(b, n, 1), redundant)
			})
		}
	}
}

// BenchmarkTCPQueryTLS is BenchmarkTCPQuery (not redundant) with and
// without mutual TLS between the engines: what the sea's certificates
// cost a query. The sizes are those of TREEBENCH_SIZES (default 64,256).
func BenchmarkTCPQueryTLS(b *testing.B) {
	sizes := []int{64, 256}
	if env := os.Getenv("TREEBENCH_SIZES"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				b.Fatalf("TREEBENCH_SIZES: %q is not a size", f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		for _, withTLS := range []bool{false, true} {
			b.Run(fmt.Sprintf("n=%d/tls=%v", n, withTLS), func(b *testing.B) {
				cfg := func(int) TCPConfig { return TCPConfig{} }
				if withTLS {
					cfg = seaTLS(b, n, nil)
				}
				benchQuery(b, newTCPSeaWith(b, n, 1, cfg), false)
			})
		}
	}
}

// benchQuery runs b.N k=10 best-rank queries over s from rotating roots,
// after one from every root (which opens the connections), and reports
// p50/p99 latency and messages per query.
func benchQuery(b *testing.B, s *tcpSea, redundant bool) {
	n := s.n
	q := api.Query{K: 10, Rank: "Memory", Requirements: "Cpus >= 4", Redundant: redundant}
	run := func(i int) *api.Answer {
		q := q
		q.Deadline = time.Now().Add(5 * time.Second)
		a, err := s.engines[(i*97)%n].Query(context.Background(), q)
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	for i := range n { // open connections from every root
		run(i)
	}
	lat := make([]time.Duration, 0, b.N)
	msgs, incomplete := 0, 0
	b.ResetTimer()
	for i := range b.N {
		a := run(i)
		lat = append(lat, a.Stats.Latency)
		msgs += a.Stats.Messages
		if a.Stats.Completeness != 1 {
			incomplete++
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(msgs)/float64(b.N), "msgs/query")
	b.ReportMetric(float64(incomplete)/float64(b.N), "incomplete/query")
}

// BenchmarkTCPQueryParallel runs queries from many roots at once, over 256
// engines (-short: 64).
func BenchmarkTCPQueryParallel(b *testing.B) {
	n := 256
	if testing.Short() {
		n = 64
	}
	s := newTCPSea(b, n, 1)
	q := api.Query{K: 10, Rank: "Memory"}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			q := q
			q.Deadline = time.Now().Add(10 * time.Second)
			if _, err := s.engines[(i*31)%n].Query(context.Background(), q); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
