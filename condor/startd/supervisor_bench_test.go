package startd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/startd/cgroup"
	"github.com/pond-htc/pond/condor/startd/jobshim"
	"github.com/pond-htc/pond/condor/wire"
)

// BenchmarkSupervisorTrueJob measures a trivial job's (/bin/true) whole
// life under its supervisor: its start, its end and the wait for every
// process of it, as isolated here, and without namespaces, each job under a
// supervisor of its own; and, resident, the jobs one after the other under
// one resident supervisor as a reused claim's are (its CPU time is counted
// once it has exited, at the end); resident-cgroup as resident, each job in
// the slot's cgroup (kept from one job to the next, as the startd keeps it)
// where the host has them. child-cpu-ms/job is the CPU time of the
// supervisors and their jobs. bare is the floor beneath them all: the job
// started by this process itself (os/exec), with no supervisor, scratch
// directory or isolation; its self-cpu-ms/job is this process's CPU time
// for it (the fork, the wait).
func BenchmarkSupervisorTrueJob(b *testing.B) {
	s := &Startd{execute: b.TempDir(), log: slog.New(slog.DiscardHandler)}
	full, err := s.jobIsolation(config.New(config.Options{}))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		iso  isolation
	}{
		{"bare", isolation{}},
		{"subreaper", isolation{}},
		{"pid-namespace", isolation{pidNS: full.pidNS, userNS: full.userNS}},
		{"isolated", full},
		{"resident", full},
		{"resident-cgroup", full},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.iso.String() != "subreaper" && !full.pidNS {
				b.Skip("no namespaces here")
			}
			var res *resident
			var cg *cgroup.Manager
			if c.name == "resident-cgroup" {
				if os.Geteuid() != 0 {
					b.Skip("cgroups need root")
				}
				if cg, err = cgroup.Open(fmt.Sprintf("pond-bench/supervisor-%d", os.Getpid())); err != nil {
					b.Skip("no cgroups here: ", err)
				}
				defer cg.Close()
			}
			if c.name == "resident" || c.name == "resident-cgroup" {
				if !full.resident {
					b.Skip("no resident supervisor here")
				}
				if res, err = startResident(s.log, "bench"); err != nil {
					b.Fatal(err)
				}
			}
			null, err := os.Open(os.DevNull)
			if err != nil {
				b.Fatal(err)
			}
			defer null.Close()
			var ru0, ru1, self0, self1 syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru0); err != nil {
				b.Fatal(err)
			}
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self0); err != nil {
				b.Fatal(err)
			}
			defer func() {
				if res != nil {
					res.close()
					<-res.exited
				}
				if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru1); err != nil {
					b.Fatal(err)
				}
				cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
				b.ReportMetric(float64(cpu)/1e6/float64(b.N), "child-cpu-ms/job")
				if c.name == "bare" {
					if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self1); err != nil {
						b.Fatal(err)
					}
					cpu := self1.Utime.Nano() + self1.Stime.Nano() - self0.Utime.Nano() - self0.Stime.Nano()
					b.ReportMetric(float64(cpu)/1e6/float64(b.N), "self-cpu-ms/job")
				}
			}()
			if c.name == "bare" {
				for b.Loop() {
					if err := exec.Command("/bin/true").Run(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			for b.Loop() {
				dir, err := os.MkdirTemp(s.execute, "dir_")
				if err != nil {
					b.Fatal(err)
				}
				spec := jobshim.Spec{Path: "/bin/true", Args: []string{"/bin/true"}, Dir: dir}
				if spec.Mounts, err = scratchMounts(dir, c.iso.mounts); err != nil {
					b.Fatal(err)
				}
				var g *cgroup.Group
				if cg != nil {
					if g, err = cg.Acquire("slot1", cgroup.Limits{MemoryBytes: 1 << 30, MaxPids: 4096}); err != nil {
						b.Fatal(err)
					}
					spec.Cgroup, spec.CgroupHome, spec.CgroupSerial = g.Procs(), cg.Home(), g.Serial()
				}
				var p *supervisor
				if res != nil {
					p, err = res.run(spec, null, null, null, func(bool) {})
				} else {
					p, err = startSupervisor(c.iso, spec, null, null, null)
				}
				if err != nil {
					b.Fatal(err)
				}
				p.wait()
				if p.final == nil || p.final.ExitCode != 0 {
					b.Fatalf("the job did not end well: %v", p.waitErr)
				}
				if g != nil {
					if err := g.Release(); err != nil {
						b.Fatal(err)
					}
				}
				removeScratch(dir)
			}
		})
	}
}

// BenchmarkStartJobsAtOnce runs trivial jobs (/bin/true) on 8 static
// slots, width at a time, each activated by a schedd of its own as the
// schedd's shadows do, and reports jobs started and ended a second: width
// 1 starts one job at a time.
func BenchmarkStartJobsAtOnce(b *testing.B) {
	for _, width := range []int{1, 8} {
		b.Run(fmt.Sprintf("width=%d", width), func(b *testing.B) {
			fs := &fakeSchedd{}
			schedd := fs.serve(b)
			cfg := config.New(config.Options{})
			for k, v := range map[string]string{"NUM_CPUS": "8", "MEMORY": "8000", "NUM_SLOTS": "8", "REPORT_RETRY_TIME": "5"} {
				if err := cfg.Set(k, v); err != nil {
					b.Fatal(err)
				}
			}
			s, err := New(Options{Config: cfg, Name: "node1", Address: "127.0.0.1:1", DataDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.shutdown()
			job := testJob(map[string]string{"Cmd": `"/bin/true"`, "TransferExecutable": "false"})
			var claims []string
			for n := 1; n <= width; n++ {
				c, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: s.slots[n-1].claimID, Job: job, Schedd: schedd})
				if err != nil {
					b.Fatal(err)
				}
				claims = append(claims, c.ClaimID)
			}
			idle := func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				for _, id := range claims {
					if sl := s.claims[id]; sl.run != nil || sl.reporting {
						return false
					}
				}
				return true
			}
			b.ResetTimer()
			start := time.Now()
			jobs := 0
			for i := 0; jobs < b.N; i++ {
				var wg sync.WaitGroup
				for _, c := range claims {
					jobs++
					wg.Go(func() {
						if _, err := s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: c, JobID: fmt.Sprintf("%d.%d", i, jobs), Job: job}); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				for !idle() {
					time.Sleep(time.Millisecond)
				}
			}
			b.ReportMetric(float64(jobs)/time.Since(start).Seconds(), "jobs/s")
		})
	}
}
