package startd

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/hostinfo"
	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/condor/wire"
)

// TestEstimatePIDs estimates the process ids the slots' jobs need against
// the host's bounds, and names the tightest bound and how to raise it.
func TestEstimatePIDs(t *testing.T) {
	for _, tt := range []struct {
		name          string
		ids           hostinfo.ProcessIDs
		jobs, threads int
		need, free    int64
		short         bool
		bound, raise  string
	}{
		{"100 slots fit", hostinfo.ProcessIDs{PIDMax: 32768, ThreadsMax: 192730, InUse: 1000}, 100, 5,
			1300, 31468, false, "kernel.pid_max", "sysctl -w kernel.pid_max=4096"},
		{"10,000 resident supervisors", hostinfo.ProcessIDs{PIDMax: 32768, ThreadsMax: 192730, InUse: 1000}, 10000, 5,
			130000, 31468, true, "kernel.pid_max", "sysctl -w kernel.pid_max=262144"},
		{"supervisors without a PID namespace", hostinfo.ProcessIDs{PIDMax: 32768, ThreadsMax: 192730, InUse: 1000}, 2000, 8,
			32000, 31468, true, "kernel.pid_max", "sysctl -w kernel.pid_max=65536"},
		{"threads-max the tighter", hostinfo.ProcessIDs{PIDMax: 4194304, ThreadsMax: 20000, InUse: 1000}, 2000, 5,
			26000, 19000, true, "kernel.threads-max", "sysctl -w kernel.threads-max=27000"},
		{"the agent's cgroup the tightest", hostinfo.ProcessIDs{PIDMax: 4194304, ThreadsMax: 192730, InUse: 1000, CgroupMax: 5000, CgroupInUse: 200, Cgroup: "/sys/fs/cgroup/pond.service"}, 500, 5,
			6500, 4800, true, "pids.max of the agent's cgroup /sys/fs/cgroup/pond.service", "echo 6700 > /sys/fs/cgroup/pond.service/pids.max (under systemd: TasksMax= of the agent's unit)"},
		{"more than a kernel takes", hostinfo.ProcessIDs{PIDMax: 32768, ThreadsMax: 1 << 30, InUse: 1000}, 400000, 5,
			5200000, 31468, true, "kernel.pid_max", "sysctl -w kernel.pid_max=4194304"},
		{"already used up", hostinfo.ProcessIDs{PIDMax: 32768, ThreadsMax: 192730, InUse: 40000}, 1, 5,
			13, 0, true, "kernel.pid_max", "sysctl -w kernel.pid_max=65536"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := estimatePIDs(tt.ids, tt.jobs, tt.threads)
			if b.need != tt.need || b.free != tt.free || b.short() != tt.short || b.bound != tt.bound || b.raise != tt.raise {
				t.Errorf("estimatePIDs = need %d, free %d, short %v, %q, %q; want %d, %d, %v, %q, %q",
					b.need, b.free, b.short(), b.bound, b.raise, tt.need, tt.free, tt.short, tt.bound, tt.raise)
			}
		})
	}
}

// TestProcessIDWarning: a startd whose slots' jobs need more process ids
// than the host has free says so, with the numbers and the knob to raise;
// one that fits says nothing. A partitionable slot counts a job a cpu.
func TestProcessIDWarning(t *testing.T) {
	for _, tt := range []struct {
		name  string
		knobs map[string]string
		ids   hostinfo.ProcessIDs
		want  []string // in the log; none for no warning
	}{
		{"a partitionable slot of 64 cpus on a small pid_max", map[string]string{"NUM_CPUS": "64", "MEMORY": "64000"},
			hostinfo.ProcessIDs{PIDMax: 1000, ThreadsMax: 100000, InUse: 200},
			[]string{"raise kernel.pid_max", "jobs_at_once=64", "ids_free=500", `raise="sysctl -w kernel.pid_max=`}},
		{"the same on a large pid_max", map[string]string{"NUM_CPUS": "64", "MEMORY": "64000"},
			hostinfo.ProcessIDs{PIDMax: 4194304, ThreadsMax: 100000, InUse: 200}, nil},
		{"static slots, threads-max the bound", map[string]string{"NUM_CPUS": "4", "MEMORY": "4000", "NUM_SLOTS": "4"},
			hostinfo.ProcessIDs{PIDMax: 4194304, ThreadsMax: 240, InUse: 200},
			[]string{"raise kernel.threads-max", "jobs_at_once=4", "ids_free=40", `raise="sysctl -w kernel.threads-max=`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStartd(t, tt.knobs)
			t.Cleanup(s.shutdown)
			var log lockedBuffer
			s.log = slog.New(slog.NewTextHandler(&log, nil))
			warned := s.warnProcessIDs(tt.ids)
			if warned != (tt.want != nil) {
				t.Fatalf("warned %v, want %v: %s", warned, tt.want != nil, log.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(log.String(), w) {
					t.Errorf("the warning lacks %q: %s", w, log.String())
				}
			}
		})
	}
}

// TestStartOutOfProcessesRequeues starts jobs whose start the kernel
// refuses with EAGAIN, as when the host's process ids run out: the job's
// pids cgroup (POND_JOB_MAX_PIDS = 1) has no room for the job's process
// beside its supervisor's threads, which are in it while it forks the job.
// Each job goes back to the queue (evicted, not held), the log says why and
// names the bounds, and however many fail so, the machine is not
// quarantined as a black hole.
func TestStartOutOfProcessesRequeues(t *testing.T) {
	fs := &fakeSchedd{}
	schedd := fs.serve(t)
	cfg := config.New(config.Options{})
	for k, v := range map[string]string{"NUM_CPUS": "1", "MEMORY": "1000", "REPORT_RETRY_TIME": "5", KnobBlackholeFailures: "2", KnobJobMaxPids: "1"} {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	var log lockedBuffer
	s, err := New(Options{Config: cfg, Name: "node1", Address: "127.0.0.1:1", DataDir: t.TempDir(), SharedExecute: sharedExecute(t),
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.shutdown)
	if s.cont.mgr == nil {
		testenv.SkipOrFailf(t, "no pids cgroup for jobs here: %s", s.cont.off)
	}
	job := testJob(map[string]string{"Cmd": `"/bin/true"`, "TransferExecutable": "false"})
	const jobs = 4
	for i := range jobs {
		if q := s.Quarantined(); q != nil {
			t.Fatalf("the machine is quarantined after %d jobs could not start for want of processes: %+v", i, q)
		}
		c, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: job, Schedd: schedd})
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("%d.0", i+1)
		if _, err := s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: c.ClaimID, JobID: id, Job: job}); err != nil {
			t.Fatal(err)
		}
		var got wire.JobReport
		eventuallyTrue(t, 10*time.Second, func() bool {
			fs.mu.Lock()
			defer fs.mu.Unlock()
			for _, r := range fs.reports {
				if r.JobID == id {
					got = r
					return true
				}
			}
			return false
		})
		if got.Kind != wire.ReportEvicted || !strings.Contains(got.Reason, "resource temporarily unavailable") {
			t.Errorf("job %s: report %+v, want it evicted for EAGAIN", id, got)
		}
		// The claim may already be gone: a quarantine releases it.
		_, _ = s.Release(context.Background(), &wire.ReleaseRequest{ClaimID: c.ClaimID})
	}
	if q := s.Quarantined(); q != nil {
		t.Errorf("the machine is quarantined after %d jobs could not start for want of processes: %+v", jobs, q)
	}
	for _, w := range []string{"no process id left", "kernel.pid_max", "pid_max=", "threads_in_use=", KnobJobMaxPids + " leaves a job no process"} {
		if !strings.Contains(log.String(), w) {
			t.Errorf("the log lacks %q: %s", w, log.String())
		}
	}
}
