package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// containPool is one agent with two slots whose jobs may have 64
// processes each.
const containPool = `
pool "contain" {
  nodes  = 1
  slots  = 2
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5", STARTER_UPDATE_INTERVAL = "2", POND_JOB_MAX_PIDS = "64" }
}

output "cm" {
  value = pool.contain.central_manager
}
`

// TestJobsAreContainedInCgroups runs, on an agent that runs as root and
// puts each job in cgroups of its own, a job that grows past its
// request_memory, which the kernel kills and the startd holds with
// HTCondor's reason; a fork bomb, which its cgroup's bound on processes
// stops, after which the node runs the next job; a job whose memory use
// is reported while it runs and is in the history once it ends; and a
// cluster whose small jobs follow big ones on the same claims, in the
// slots' cgroups kept from one job to the next, each reporting its own
// use only.
func TestJobsAreContainedInCgroups(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "cgroups are written by an agent that runs as root")
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", containPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, cm)
		}
		w.run("destroy", "-auto-approve")
	})
	r := w.expect(0, "condor", "status", "-pool", cm, "-af", "PondJobCgroup", "PondJobCgroupOff")
	if v := strings.Fields(r.stdout); len(v) == 0 || v[0] != "v1" && v[0] != "v2" {
		testenv.SkipOrFailf(t, "the agent cannot put jobs in cgroups here: PondJobCgroup %s", r.stdout)
	}

	for name, script := range map[string]string{
		"hog.sh":  "#!/bin/sh\nhead -c 500M /dev/zero | tail\n",
		"bomb.sh": "#!/bin/sh\ni=0\nwhile [ $i -lt 100000 ]; do sleep 100 & i=$((i+1)); done\n",
		"use.sh":  "#!/bin/sh\nx=$(head -c 40000000 /dev/zero | tr '\\0' a)\nsleep 10\necho ${#x}\n",
		"kept.sh": "#!/bin/sh\nif [ $1 -lt 2 ]; then x=$(head -c 40000000 /dev/zero | tr '\\0' a); i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo ${#x}; fi\n",
	} {
		w.write(name, script)
		if err := os.Chmod(filepath.Join(w.dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.write("hog.sub", "executable = hog.sh\nrequest_memory = 64\nqueue\n")
	w.write("bomb.sub", "executable = bomb.sh\nerror = bomb.err\nqueue\n")
	w.write("use.sub", "executable = use.sh\nrequest_memory = 256\noutput = use.out\nqueue\n")
	w.write("after.sub", "executable = /bin/echo\narguments = after\noutput = after.out\nqueue\n")
	for i, f := range []string{"hog.sub", "bomb.sub", "use.sub"} {
		r := w.expect(0, "condor", "submit", "-pool", cm, f)
		if !strings.Contains(r.stdout, fmt.Sprintf("submitted to cluster %d.", i+1)) {
			t.Fatalf("submit %s:\n%s", f, r.stdout)
		}
	}

	// The job over its memory is held, with HTCondor's code and reason,
	// and is not run again.
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "1.0", "-af", "JobStatus", "HoldReasonCode", "HoldReasonSubCode", "NumJobStarts")
		if f := strings.Fields(r.stdout); len(f) < 4 || f[0] != "5" || f[1] != "34" || f[2] != "0" || f[3] != "1" {
			return fmt.Errorf("job 1.0: JobStatus HoldReasonCode HoldReasonSubCode NumJobStarts = %q, want 5 34 0 1", r.stdout)
		}
		return nil
	})
	r = w.expect(0, "condor", "q", "-pool", cm, "1.0", "-af", "HoldReason")
	reason := strings.TrimSpace(r.stdout)
	if !strings.Contains(reason, ": Job has gone over cgroup memory limit of 64 megabytes. Peak usage: ") ||
		!strings.HasSuffix(reason, " megabytes.  Consider resubmitting with a higher request_memory.") {
		t.Fatalf("HoldReason %q", reason)
	}

	// Its memory use is reported while it runs, and is in the history.
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "3.0", "-af", "JobStatus", "MemoryUsage", "ResidentSetSize")
		f := strings.Fields(r.stdout)
		if len(f) < 3 || f[0] != "2" {
			return fmt.Errorf("job 3.0: JobStatus MemoryUsage ResidentSetSize = %q, want it running", r.stdout)
		}
		if mem, _ := strconv.Atoi(f[1]); mem < 30 {
			return fmt.Errorf("job 3.0 runs with MemoryUsage %s, want the 40 MB it holds", f[1])
		}
		return nil
	})
	// The fork bomb fails to fork past its bound, and ends.
	eventually(t, 90*time.Second, func() error {
		r := w.run("condor", "history", "-pool", cm, "2.0", "-af", "JobStatus", "ExitCode")
		if f := strings.Fields(r.stdout); len(f) < 2 || f[0] != "4" || f[1] == "0" {
			return fmt.Errorf("fork bomb 2.0 in the history: JobStatus ExitCode = %q, want 4 and a failure", r.stdout)
		}
		return nil
	})
	if err := readText(w, "bomb.err"); !strings.Contains(err, "fork") {
		t.Errorf("the fork bomb's error says %q, want that it could not fork", err)
	}

	w.expect(0, "condor", "submit", "-pool", cm, "after.sub")
	eventually(t, 60*time.Second, func() error {
		got, out := historyRows(w, cm, "-af", "ClusterId", "ExitCode", "MemoryUsage", "ResidentSetSize", "RemoteUserCpu", "CpusUsage")
		use, after := got["3"], got["4"]
		if use == nil || after == nil {
			return fmt.Errorf("history:\n%s", out)
		}
		if after[0] != "0" {
			return fmt.Errorf("the job after the fork bomb: ExitCode %s", after[0])
		}
		mem, _ := strconv.Atoi(use[1])
		rss, _ := strconv.Atoi(use[2])
		if use[0] != "0" || mem < 30 || rss < 30*1024 {
			return fmt.Errorf("job 3.0 in the history: ExitCode MemoryUsage ResidentSetSize = %v, want 0, 30 MiB and 30720 KiB at least", use[:3])
		}
		if cpu, err := strconv.ParseFloat(use[3], 64); err != nil || cpu <= 0 {
			return fmt.Errorf("job 3.0 in the history: RemoteUserCpu %s", use[3])
		}
		return nil
	})
	if out := readText(w, "after.out"); out != "after\n" {
		t.Errorf("the job after the fork bomb wrote %q", out)
	}

	// Jobs 5.0 and 5.1 hold 40 MB and spend CPU on the two slots; 5.2
	// and 5.3 follow them on the same claims, with the same limits, in
	// the cgroups the first two left: their use is theirs alone.
	w.write("kept.sub", "executable = kept.sh\narguments = $(Process)\nrequest_memory = 256\nqueue 4\n")
	w.expect(0, "condor", "submit", "-pool", cm, "kept.sub")
	eventually(t, 90*time.Second, func() error {
		got, out := historyRows(w, cm, "-constraint", "ClusterId == 5", "-af", "ProcId", "ExitCode", "MemoryUsage", "RemoteUserCpu")
		if len(got) < 4 {
			return fmt.Errorf("cluster 5 in the history:\n%s", out)
		}
		for proc, u := range got {
			mem, _ := strconv.Atoi(u[1])
			cpu, _ := strconv.ParseFloat(u[2], 64)
			big := proc == "0" || proc == "1"
			switch {
			case u[0] != "0":
				t.Errorf("job 5.%s: ExitCode %s", proc, u[0])
			case big && (mem < 30 || cpu <= 0):
				t.Errorf("job 5.%s: MemoryUsage %d, RemoteUserCpu %v; want its 40 MB and its CPU", proc, mem, cpu)
			case !big && (mem >= 30 || cpu >= 0.1):
				t.Errorf("job 5.%s: MemoryUsage %d, RemoteUserCpu %v; want its own, not the job's before it on its slot", proc, mem, cpu)
			}
		}
		return nil
	})
}

// historyRows runs condor history with args, one attribute a field
// (-af), and returns the rows that have every field, by their first, with
// the command's output.
func historyRows(w *workdir, cm string, args ...string) (map[string][]string, string) {
	r := w.run(append([]string{"condor", "history", "-pool", cm}, args...)...)
	fields := 0
	for i, a := range args {
		if a == "-af" {
			fields = len(args) - i - 1
		}
	}
	got := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if f := strings.Fields(l); len(f) >= fields && len(f) > 0 {
			got[f[0]] = f[1:]
		}
	}
	return got, r.stdout
}

// readText is the text of the file name of w's directory, empty if none.
func readText(w *workdir, name string) string {
	b, _ := os.ReadFile(filepath.Join(w.dir, name))
	return string(b)
}

// uncontainedPool is containPool's agent where cgroups cannot be made (its
// BASE_CGROUP lies below a file).
const uncontainedPool = `
pool "uncontained" {
  nodes  = 1
  slots  = 1
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5", BASE_CGROUP = "cgroup.procs/pond" }
}

output "cm" {
  value = pool.uncontained.central_manager
}
`

// TestJobsRunWithoutCgroups: an agent that cannot put jobs in cgroups says
// so once in its log and in its machine ad, and runs jobs without.
func TestJobsRunWithoutCgroups(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", uncontainedPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() {
		if t.Failed() {
			describeJobs(t, w, cm)
		}
		w.run("destroy", "-auto-approve")
	})
	r := w.expect(0, "condor", "status", "-pool", cm, "-af", "PondJobCgroup", "PondJobCgroupOff")
	if f := strings.Fields(r.stdout); len(f) < 2 || f[0] != "off" {
		t.Fatalf("PondJobCgroup PondJobCgroupOff = %q, want off and why", r.stdout)
	}
	w.write("echo.sub", "executable = /bin/echo\narguments = uncontained\noutput = echo.out\nqueue\n")
	w.expect(0, "condor", "submit", "-pool", cm, "echo.sub")
	eventually(t, 60*time.Second, func() error {
		if out := readText(w, "echo.out"); out != "uncontained\n" {
			return fmt.Errorf("the job wrote %q", out)
		}
		return nil
	})
	logs, _ := filepath.Glob(filepath.Join(w.dir, ".pond", "local", "nodes", "*", "agent.log"))
	said := 0
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		said += strings.Count(string(b), "jobs cannot have cgroups of their own here")
	}
	if said != 1 {
		t.Errorf("the agent's log says %d times that jobs have no cgroups, want once", said)
	}
}
