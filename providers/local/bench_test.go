package local

import (
	"fmt"
	"testing"
	"time"

	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

// BenchmarkPoolCreateDestroy creates and destroys a pool of 10 local agents
// (fast gossip profile): start, health, full mutual membership, then
// graceful leave and cleanup.
func BenchmarkPoolCreateDestroy(b *testing.B) {
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			p := New().(*Provider)
			wd := b.TempDir()
			if err := providers.Err(p.Configure(b.Context(), configureReq(wd)).Diagnostics); err != nil {
				b.Fatal(err)
			}
			cfg := poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(int64(n))})
			var createT, destroyT time.Duration
			for b.Loop() {
				t0 := time.Now()
				s := create(b, p, "pool.bench", cfg)
				t1 := time.Now()
				destroy(b, p, "pool.bench", s)
				createT += t1.Sub(t0)
				destroyT += time.Since(t1)
			}
			b.ReportMetric(float64(createT.Milliseconds())/float64(b.N), "create-ms")
			b.ReportMetric(float64(destroyT.Milliseconds())/float64(b.N), "destroy-ms")
		})
	}
}
