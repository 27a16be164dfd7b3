package tree

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkTCPQuery measures k=10 best-rank queries over n in-process
// engines on loopback TCP, from rotating roots, and reports p50/p99 query
// latency and messages per query.
func BenchmarkTCPQuery(b *testing.B) {
	for _, n := range []int{64, 256, 512} {
		for _, redundant := range []bool{false, true} {
			if n == 512 && redundant && testing.Short() {
				continue
			}
			b.Run(fmt.Sprintf("n=%d/redundant=%v", n, redundant), func(b *testing.B) {
				s := newTCPSea(b, n, 1)
				q := Query{K: 10, Rank: "Memory", Requirements: "Cpus >= 4", Redundant: redundant}
				run := func(i int) *Answer {
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
			})
		}
	}
}

// BenchmarkTCPQueryParallel runs queries from many roots at once.
func BenchmarkTCPQueryParallel(b *testing.B) {
	const n = 256
	s := newTCPSea(b, n, 1)
	q := Query{K: 10, Rank: "Memory"}
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
