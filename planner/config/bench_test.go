package config

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bigConfig returns a native-syntax configuration of n resources spread
// over files of 1,000 resources, each referring to a variable, a local and
// the previous resource, as a planner's input would.
func bigConfig(n int) map[string]string {
	files := map[string]string{"main.pond.hcl": `
variable "workers" {
  type    = number
  default = 2
}
locals {
  site = "campus"
}
provider "local" {}
`}
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `pool "p%d" {
  provider   = provider.local
  nodes      = var.workers + %d
  attributes = { Site = local.site, Index = %d }
  config     = { NEGOTIATOR_INTERVAL = "5" }
`, i, i%7, i)
		if i > 0 {
			fmt.Fprintf(&b, "  depends_on = [pool.p%d]\n", i-1)
		}
		if i%10 == 0 {
			b.WriteString("  count      = 2\n  slots      = count.index + 1\n")
		}
		b.WriteString("  lifecycle {\n    ignore_changes = [attributes]\n  }\n}\n\n")
		if (i+1)%1000 == 0 || i == n-1 {
			files[fmt.Sprintf("pools%03d.pond.hcl", i/1000)] = b.String()
			b.Reset()
		}
	}
	return files
}

// BenchmarkLoad10000 loads and validates a 10,000-resource configuration
// from disk.
func BenchmarkLoad10000(b *testing.B) {
	dir := writeDir(b, bigConfig(10000))
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	for b.Loop() {
		cfg, diags := LoadDir(dir, LoadOptions{})
		if diags.HasErrors() {
			b.Fatal(diagsString(diags))
		}
		if len(cfg.Resources) != 10000 {
			b.Fatalf("%d resources", len(cfg.Resources))
		}
		if diags := cfg.Validate(); diags.HasErrors() {
			b.Fatal(diagsString(diags))
		}
	}
	reportCPU(b, start)
}

// BenchmarkLoadOnly10000 is BenchmarkLoad10000 without Validate.
func BenchmarkLoadOnly10000(b *testing.B) {
	dir := writeDir(b, bigConfig(10000))
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	for b.Loop() {
		if _, diags := LoadDir(dir, LoadOptions{}); diags.HasErrors() {
			b.Fatal(diagsString(diags))
		}
	}
	reportCPU(b, start)
}

// cpuTime is the process's user+system CPU time: on a shared machine it
// varies less than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric((cpuTime()-start).Seconds()/float64(b.N), "cpu-s/op")
}

func TestBigConfigValid(t *testing.T) {
	cfg, diags := LoadDir(writeDir(t, bigConfig(100)), LoadOptions{})
	diags = append(diags, cfg.Validate()...)
	if len(diags) != 0 {
		t.Fatal(diagsString(diags))
	}
}

// BenchmarkLoadLongLine loads a file of one long line whose positions
// are all mapped back to the source, as they are for a file with
// semicolons or malformed UTF-8: the time per byte stays flat as the line
// grows.
func BenchmarkLoadLongLine(b *testing.B) {
	for _, n := range []int{4_000, 64_000} {
		for name, tail := range map[string]string{"semicolons": "; y = 1 }\n", "malformed-utf8": " } # \xff\n"} {
			src := []byte("locals { x = [" + strings.Repeat("1,", n) + "]" + tail)
			b.Run(fmt.Sprintf("%s/%d", name, len(src)), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if _, diags := LoadFiles(b.TempDir(), map[string][]byte{"main.pond.hcl": src}, LoadOptions{}); diags.HasErrors() {
						b.Fatal(diagsString(diags))
					}
				}
			})
		}
	}
}
