package history

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

func slotAd(name string, memory int, now time.Time, load float64) map[string]string {
	return map[string]string{
		"MyType": `"Machine"`, "Name": fmt.Sprintf("%q", name), "Machine": `"a"`, "State": `"Unclaimed"`,
		"Memory": fmt.Sprint(memory), "Cpus": "1", "MyCurrentTime": fmt.Sprint(now.Unix()),
		"LastHeardFrom": fmt.Sprint(now.Unix()), "TotalLoadAvg": fmt.Sprint(load), "Start": "true",
	}
}

// openClocked opens a store in a fresh directory with opts and a clock
// of its own that starts at t0. reopen closes the store it is given and
// opens it again, so that what was observed is written.
func openClocked(t *testing.T, t0 time.Time, opts Options) (s *Store, clk *clock, reopen func(*Store) *Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.db")
	clk = &clock{t: t0}
	opts.Now = clk.now
	reopen = func(s *Store) *Store {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return open(t, path, opts)
	}
	return open(t, path, opts), clk, reopen
}

func constraint(t *testing.T, src string) func(*classad.Ad) bool {
	t.Helper()
	m, err := wire.Constraint(src)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSnapshotDedupAndInterval(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	// Each step observes the ad at an offset from t0; want says whether
	// a snapshot was stored.
	type step struct {
		after  time.Duration
		memory int
		load   float64
		gone   bool
		want   bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"first ad is stored", []step{{0, 1024, 0, false, true}}},
		{"same ad again is not", []step{{0, 1024, 0, false, true}, {0, 1024, 0, false, false}}},
		{"volatile change within the interval is not", []step{{0, 1024, 0, false, true}, {time.Minute, 1024, 0.5, false, false}}},
		{"volatile change after the interval is", []step{{0, 1024, 0, false, true}, {16 * time.Minute, 1024, 0.5, false, true}}},
		{"material change at once is", []step{{0, 1024, 0, false, true}, {10 * time.Second, 2048, 0, false, true}}},
		{"material change back is", []step{{0, 1024, 0, false, true}, {10 * time.Second, 2048, 0, false, true}, {20 * time.Second, 1024, 0, false, true}}},
		{"gone, then back", []step{{0, 1024, 0, false, true}, {time.Second, 0, 0, true, true}, {time.Second, 0, 0, true, false}, {2 * time.Second, 1024, 0, false, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clk, reopen := openClocked(t, t0, Options{})
			stored := 0
			for i, st := range tc.steps {
				clk.set(t0.Add(st.after))
				if st.gone {
					s.Gone("slot1@a", "a")
				} else {
					// Memory and the clock in the ad; the clock alone is volatile.
					s.ObserveAd("slot1@a", "a", slotAd("slot1@a", st.memory, clk.now(), st.load))
				}
				// Reopen between steps: the last snapshot is read back.
				s = reopen(s)
				rep, err := s.Query(ctx, Query{Snapshots: true, Since: t0.Add(-time.Hour), Until: t0.Add(time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
				if st.want {
					stored++
				}
				if len(rep.Snapshots) != stored {
					t.Fatalf("step %d: %d snapshots, want %d: %+v", i, len(rep.Snapshots), stored, rep.Snapshots)
				}
			}
			s.Close()
		})
	}
}

// TestSnapshotCoalesce: a slot's ad is snapshot at most once every
// SnapshotCoalesce; of the changes within it, the last is stored once it
// has passed, with the time it was received, whether the slot's next ad
// or the writer's flush comes first, and a change that went back is not.
func TestSnapshotCoalesce(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	s, clk, _ := openClocked(t, t0, Options{Flush: 10 * time.Millisecond})
	defer s.Close()
	observe := func(after time.Duration, memory int) {
		t.Helper()
		clk.set(t0.Add(after))
		s.ObserveAd("slot1@a", "a", slotAd("slot1@a", memory, t0, 0))
	}
	stored := func(want string) {
		t.Helper()
		var got string
		deadline := time.Now().Add(10 * time.Second)
		for {
			rep, err := s.Query(ctx, Query{Snapshots: true, Since: t0.Add(-time.Hour), Until: t0.Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, x := range rep.Snapshots {
				m := x.Ad["Memory"]
				if x.Gone {
					m = "gone"
				}
				out = append(out, fmt.Sprintf("%s@%s", m, x.At.Sub(t0)))
			}
			if got = strings.Join(out, " "); got == want || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got != want {
			t.Fatalf("snapshots %q, want %q", got, want)
		}
	}
	observe(0, 1000) // the first: stored at once
	observe(time.Second, 1001)
	observe(2*time.Second, 1002) // replaces 1001
	stored("1000@0s")
	observe(6*time.Second, 1002) // the period passed: 1002 stored, as received
	stored("1000@0s 1002@2s")
	observe(7*time.Second, 1003) // held until the writer's flush past 11 s
	stored("1000@0s 1002@2s")
	clk.set(t0.Add(12 * time.Second))
	stored("1000@0s 1002@2s 1003@7s")
	observe(13*time.Second, 1004)
	observe(14*time.Second, 1003) // back as stored: nothing held
	clk.set(t0.Add(30 * time.Second))
	time.Sleep(100 * time.Millisecond)
	stored("1000@0s 1002@2s 1003@7s")
	observe(31*time.Second, 1005) // stored at once, after a quiet period
	observe(32*time.Second, 1006)
	s.Gone("slot1@a", "a") // what was held stood until the slot left
	stored("1000@0s 1002@2s 1003@7s 1005@31s 1006@32s gone@32s")
}

func TestSnapshotAtAndConstraint(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	s, clk, reopen := openClocked(t, t0, Options{})
	s.ObserveAd("slot1@a", "a", slotAd("slot1@a", 512, clk.now(), 0))
	s.ObserveAd("slot1@b", "b", slotAd("slot1@b", 4096, clk.now(), 0))
	clk.add(10 * time.Minute)
	s.ObserveAd("slot1@a", "a", slotAd("slot1@a", 2048, clk.now(), 0)) // Memory grew
	clk.add(10 * time.Minute)
	s.Gone("slot1@b", "b")
	s = reopen(s)
	defer s.Close()
	names := func(sn []Snapshot) string {
		var out []string
		for _, x := range sn {
			out = append(out, fmt.Sprintf("%s/%s", x.Name, x.Ad["Memory"]))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		name       string
		at         time.Time
		constraint string
		machine    string
		want       string
	}{
		{"before everything", t0.Add(-time.Second), "", "", ""},
		{"at the start", t0, "", "", "slot1@a/512 slot1@b/4096"},
		{"between", t0.Add(5 * time.Minute), "", "", "slot1@a/512 slot1@b/4096"},
		{"after the change", t0.Add(10 * time.Minute), "", "", "slot1@a/2048 slot1@b/4096"},
		{"after b left", t0.Add(30 * time.Minute), "", "", "slot1@a/2048"},
		{"constraint at the start", t0, "Memory > 1000", "", "slot1@b/4096"},
		{"constraint after the change", t0.Add(10 * time.Minute), "Memory > 1000", "", "slot1@a/2048 slot1@b/4096"},
		{"one machine", t0.Add(10 * time.Minute), "", "a", "slot1@a/2048"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := Query{Snapshots: true, At: tc.at, Machine: tc.machine}
			if tc.constraint != "" {
				q.Match = constraint(t, tc.constraint)
			}
			rep, err := s.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(rep.Snapshots); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	// A period: every snapshot in it, a constraint over each.
	rep, err := s.Query(ctx, Query{Snapshots: true, Since: t0, Until: t0.Add(time.Hour), Match: constraint(t, "Memory > 1000")})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(rep.Snapshots); got != "slot1@b/4096 slot1@a/2048" {
		t.Fatalf("period: got %q", got)
	}
}

func TestSnapshotRotation(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name      string
		retention time.Duration
		maxBytes  int64
		// wantFirst is the Memory of the oldest snapshot left of the
		// 100 taken a minute apart (Memory 1000+i); wantMax bounds the
		// size left.
		wantFirst int
		wantMax   int64
	}{
		{"by age", 30 * time.Minute, 1 << 30, 1069, 1 << 30},
		{"by size", 24 * time.Hour, 4000, -1, 4000},
		{"neither", 24 * time.Hour, 1 << 30, 1000, 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clk, reopen := openClocked(t, t0, Options{SnapshotRetention: tc.retention, SnapshotMaxBytes: tc.maxBytes})
			for i := range 100 {
				s.ObserveAd("slot1@a", "a", slotAd("slot1@a", 1000+i, clk.now(), 0))
				clk.add(time.Minute)
			}
			clk.add(-time.Minute)
			s = reopen(s) // reopening prunes
			defer s.Close()
			n, err := s.SnapshotBytes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n > tc.wantMax {
				t.Fatalf("%d bytes left, over %d", n, tc.wantMax)
			}
			rep, err := s.Query(ctx, Query{Snapshots: true, Since: t0, Until: clk.now()})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Snapshots) == 0 {
				t.Fatal("every snapshot pruned")
			}
			first := rep.Snapshots[0].Ad["Memory"]
			last := rep.Snapshots[len(rep.Snapshots)-1].Ad["Memory"]
			if last != "1099" {
				t.Fatalf("the newest snapshot pruned: last Memory %s", last)
			}
			if tc.wantFirst >= 0 && first != fmt.Sprint(tc.wantFirst) {
				t.Fatalf("oldest left has Memory %s, want %d (%d left)", first, tc.wantFirst, len(rep.Snapshots))
			}
			if tc.wantFirst < 0 && (first == "1000" || len(rep.Snapshots) >= 100) {
				t.Fatalf("nothing pruned by size: %d left, %d bytes", len(rep.Snapshots), n)
			}
		})
	}
}

func TestVolatile(t *testing.T) {
	for name, want := range map[string]bool{
		"MyCurrentTime": true, "LastHeardFrom": true, "TotalLoadAvg": true, "CondorLoadAvg": true, "KeyboardIdle": true,
		"RecentJobStarts": true, "MonitorSelfCPUUsage": true, "EnteredCurrentState": true, "Disk": true,
		"Memory": false, "Cpus": false, "State": false, "Start": false, "Requirements": false, "OpSys": false,
		"PondQuarantined": false,
	} {
		if got := Volatile(name); got != want {
			t.Errorf("Volatile(%s) = %v, want %v", name, got, want)
		}
	}
}

func FuzzDecodeAd(f *testing.F) {
	b, _ := encodeAd(map[string]string{"Memory": "1024"})
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ad, err := decodeAd(b)
		if err != nil {
			return
		}
		again, err := encodeAd(ad)
		if err != nil {
			return
		}
		if back, err := decodeAd(again); err != nil || len(back) != len(ad) {
			t.Fatalf("round trip: %v, %d != %d", err, len(back), len(ad))
		}
	})
}

// realAd is a partitionable slot's ad of about the size a pond startd
// advertises (70 attributes).
func realAd(i int) map[string]string {
	ad := slotAd(fmt.Sprintf("slot1@node%04d", i), 1024, time.Unix(1_700_000_000, 0), 0.5)
	for j := range 60 {
		ad[fmt.Sprintf("PondAttr%02d", j)] = fmt.Sprintf(`"value %d of a machine attribute (x86_64, LINUX, 9.0.%d)"`, j, j)
	}
	return ad
}

// BenchmarkObserveAdUnchanged is the cost an update of an unchanged slot
// adds to the collector's update path: hashing its ad.
func BenchmarkObserveAdUnchanged(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "history.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ad := realAd(0)
	s.ObserveAd("slot1@node0000", "node0000", ad)
	b.ReportAllocs()
	for b.Loop() {
		s.ObserveAd("slot1@node0000", "node0000", ad)
	}
}

// TestSnapshotSize reports the stored size of a snapshot of a realistic
// ad against its text.
func TestSnapshotSize(t *testing.T) {
	ad := realAd(0)
	var text int
	for k, v := range ad {
		text += len(k) + len(v) + 4
	}
	b, err := encodeAd(ad)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("an ad of %d attributes: %d bytes of text, %d stored (%.0f%%)", len(ad), text, len(b), 100*float64(len(b))/float64(text))
	if len(b) >= text {
		t.Fatalf("the stored ad (%d bytes) is not smaller than its text (%d)", len(b), text)
	}
}

// TestAdEncoderReused checks that one encoder, reset from ad to ad as the
// store's writer uses it, gives each ad a stored form of its own that
// reads back as that ad, the same bytes as a fresh encoder's, and that
// reusing it allocates a small part of what a fresh compressor does.
func TestAdEncoderReused(t *testing.T) {
	var e adEncoder
	var got [][]byte
	for i := range 3 {
		b, err := e.encode(realAd(i))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b)
	}
	for i, b := range got {
		ad, err := decodeAd(b)
		if err != nil {
			t.Fatalf("ad %d: %v", i, err)
		}
		want := realAd(i)
		if len(ad) != len(want) || ad["Name"] != want["Name"] {
			t.Errorf("ad %d read back as %s, want %s", i, ad["Name"], want["Name"])
		}
		fresh, _ := encodeAd(want)
		if !bytes.Equal(b, fresh) {
			t.Errorf("ad %d: a reused encoder's %d bytes differ from a fresh one's %d", i, len(b), len(fresh))
		}
	}
	ad := realAd(0)
	reused := testing.AllocsPerRun(20, func() { e.encode(ad) })
	var freshBytes, reusedBytes uint64
	measure := func(f func()) uint64 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range 20 {
			f()
		}
		runtime.ReadMemStats(&m1)
		return (m1.TotalAlloc - m0.TotalAlloc) / 20
	}
	freshBytes = measure(func() { encodeAd(ad) })
	reusedBytes = measure(func() { e.encode(ad) })
	if reusedBytes*10 > freshBytes {
		t.Errorf("a reused encoder allocates %d bytes an ad (%.0f allocations), a fresh one %d: want a tenth at most", reusedBytes, reused, freshBytes)
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkObserveAdPerJob is what the snapshots of a slot cost whose
// claim runs one short job after another (its ad Busy with the job's
// JobId, then Idle, a job every 10 ms of the store's clock), the store's
// writer included (cpu-µs/job, the process's CPU to the store's close), with SnapshotCoalesce's default against a snapshot at
// every change; it reports the snapshots stored per job.
func BenchmarkObserveAdPerJob(b *testing.B) {
	for _, bc := range []struct {
		name     string
		coalesce time.Duration
	}{{"every-change", -1}, {"coalesced", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			t0 := time.Unix(1_700_000_000, 0)
			clk := &clock{t: t0}
			s, err := Open(ctx, filepath.Join(b.TempDir(), "history.db"), Options{SnapshotCoalesce: bc.coalesce, Now: clk.now, Queue: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			idle := realAd(0)
			b.ReportAllocs()
			cpu0 := processCPU(b)
			i := 0
			for b.Loop() {
				busy := maps.Clone(idle)
				busy["Activity"], busy["JobId"] = `"Busy"`, fmt.Sprintf(`"%d.0"`, i)
				s.ObserveAd("slot1@node0000", "node0000", busy)
				clk.add(5 * time.Millisecond)
				s.ObserveAd("slot1@node0000", "node0000", idle)
				clk.add(5 * time.Millisecond)
				i++
			}
			if err := s.Close(); err != nil { // the writer's work, done
				b.Fatal(err)
			}
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(i), "cpu-µs/job")
			s, err = Open(ctx, s.path, Options{Now: clk.now})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			rep, err := s.Query(ctx, Query{Snapshots: true, Since: t0.Add(-time.Hour), Until: clk.now().Add(time.Hour), Limit: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(rep.Snapshots))/float64(i), "snapshots/job")
		})
	}
}
