package xfer

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// BenchmarkSendLarge sends a sparse file of POND_BENCH_MIB MiB (default
// 2048) over a loopback socket to a receiver that stores it, as the
// daemons do, and reports the peak heap in use (runtime.MemStats, sampled
// every 10 ms) and the process's peak resident memory (VmHWM) next to the
// throughput:
//
//	go test -run '^$' -bench SendLarge -benchtime 1x ./condor/internal/xfer/
func BenchmarkSendLarge(b *testing.B) {
	size := int64(2048) << 20
	if v := os.Getenv("POND_BENCH_MIB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			b.Fatalf("POND_BENCH_MIB=%q: want a number of MiB", v)
		}
		size = n << 20
	}
	src := filepath.Join(b.TempDir(), "big.in")
	f, err := os.Create(src)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		b.Fatal(err)
	}
	f.Close()
	dir := b.TempDir()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr, err := wire.NewTransferReader(r.Body, nil)
		if err != nil {
			wire.WriteError(w, http.StatusBadRequest, err)
			return
		}
		out, err := os.CreateTemp(dir, ".partial-*")
		if err != nil {
			wire.WriteError(w, http.StatusInternalServerError, err)
			return
		}
		info, err := Receive(tr, out, nil)
		out.Close()
		if err == nil {
			err = os.Rename(out.Name(), filepath.Join(dir, "big.out"))
		}
		if err != nil {
			os.Remove(out.Name())
			wire.WriteError(w, http.StatusBadRequest, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, info)
	}))
	b.Cleanup(srv.Close)
	c := wire.NewStartd(srv.Listener.Addr().String(), "")
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var mu sync.Mutex
	var peakHeap uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			mu.Lock()
			peakHeap = max(peakHeap, m.HeapInuse)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		if _, err := Send(context.Background(), c.SendInput, wire.TransferHeader{Name: "big.in"}, func() (*os.File, error) { return os.Open(src) }, Options{}); err != nil {
			b.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, "big.out")); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(vmHWM())/(1<<10), "VmHWM-MiB")
}

// vmHWM is this process's peak resident memory in KiB.
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
