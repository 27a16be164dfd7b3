package acceptance

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkLocalThroughput measures job throughput through the real
// binary: examples/local as it is (four agents, two slots each, every call
// with a token over TLS), one submit of N trivial jobs (/bin/true, nothing
// transferred), timed from the submit to the last job's termination event
// in the job log. It reports jobs/s, and the CPU time per job of every
// agent of the pool with what they waited for and their children still
// running (agents-cpu-ms/job: the supervisors and jobs) and of the central manager's agent alone, which
// runs the schedd, the negotiator, the collector and a startd
// (cm-cpu-ms/job): on a shared machine, the CPU per job is the figure that
// holds. Each iteration submits another N to the same pool. N defaults to
// 1,000; LOCALBENCH_JOBS=10000 overrides it. Run it with the built binary,
// for example:
//
//	make build && POND_BIN=$PWD/bin/pondctl go test -run '^$' -bench LocalThroughput -benchtime 1x -timeout 30m ./acceptance/
func BenchmarkLocalThroughput(b *testing.B) {
	for _, n := range benchSizes(b, "LOCALBENCH_JOBS", []int{1000}, 1) {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) { benchLocalThroughput(b, n) })
	}
}

func benchLocalThroughput(b *testing.B, n int) {
	b.StopTimer()
	w := newWorkdir(b, "local")
	if r := w.run("apply", "-auto-approve"); r.code != 0 {
		b.Fatalf("creating the pool: %s", r)
	}
	defer w.run("destroy", "-auto-approve")
	cm := w.output("central_manager")
	pids := agentPIDs(w.dir)
	if len(pids) == 0 {
		b.Fatal("no agent of the pool found running")
	}
	cmPID := 0
	for _, pid := range pids {
		if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(raw), "campus-0") {
			cmPID = pid
		}
	}
	if cmPID == 0 {
		b.Fatal("the central manager's agent (campus-0) is not running")
	}
	var elapsed, agentsCPU, cmCPU time.Duration
	var machineUpdates, commits float64
	for i := range b.N {
		log := fmt.Sprintf("bench%d.log", i)
		sub := fmt.Sprintf("bench%d.sub", i)
		w.write(sub, fmt.Sprintf("executable = /bin/true\ntransfer_executable = false\nrequest_memory = 16\nlog = %s\nqueue %d\n", log, n))
		m0 := cmMetrics(b, w, cm)
		all0, cm0 := agentsCPUTime(b, pids), agentsCPUTime(b, []int{cmPID})
		start := time.Now()
		b.StartTimer()
		r := w.run("condor", "submit", "-pool", cm, sub)
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("%d job(s) submitted", n)) {
			b.Fatalf("condor submit: %s", r)
		}
		waitTerminated(b, filepath.Join(w.dir, log), n, 10*time.Minute)
		b.StopTimer()
		elapsed += time.Since(start)
		agentsCPU += agentsCPUTime(b, pids) - all0
		cmCPU += agentsCPUTime(b, []int{cmPID}) - cm0
		m := cmMetrics(b, w, cm)
		machineUpdates += m[`pond_collector_updates_total{type="Machine"}`] - m0[`pond_collector_updates_total{type="Machine"}`]
		commits += m["pond_schedd_queue_commit_seconds_count"] - m0["pond_schedd_queue_commit_seconds_count"]
	}
	jobs := float64(n * b.N)
	b.ReportMetric(jobs/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(agentsCPU.Microseconds())/1000/jobs, "agents-cpu-ms/job")
	b.ReportMetric(float64(cmCPU.Microseconds())/1000/jobs, "cm-cpu-ms/job")
	// The startds' updates of their slots' ads the collector took, and the
	// schedd's job queue transactions, per job.
	b.ReportMetric(machineUpdates/jobs, "slot-updates/job")
	b.ReportMetric(commits/jobs, "queue-commits/job")
}

// cmMetrics is the central manager's /metrics, each sample's name (with
// its labels) to its value.
func cmMetrics(b *testing.B, w *workdir, cm string) map[string]float64 {
	b.Helper()
	resp, err := w.agentGet(cm, "/metrics")
	if err != nil {
		b.Fatalf("the central manager's metrics: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// waitTerminated waits until the job log at path holds n termination
// events (005), reading only what was appended since it last looked, and
// fails if it holds more (a job run twice) or time runs out.
func waitTerminated(b *testing.B, path string, n int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	var off int64
	var partial []byte
	seen := 0
	for {
		f, err := os.Open(path)
		if err == nil {
			if _, err = f.Seek(off, io.SeekStart); err == nil {
				var data []byte
				data, err = io.ReadAll(f)
				off += int64(len(data))
				data = append(partial, data...)
				cut := bytes.LastIndexByte(data, '\n') + 1
				for _, line := range bytes.Split(data[:cut], []byte("\n")) {
					if bytes.HasPrefix(line, []byte("005 (")) {
						seen++
					}
				}
				partial = append([]byte(nil), data[cut:]...)
			}
			f.Close()
		}
		if err != nil && !os.IsNotExist(err) {
			b.Fatalf("reading the job log: %v", err)
		}
		switch {
		case seen > n:
			b.Fatalf("%d termination events for %d jobs: a job ran twice", seen, n)
		case seen == n:
			return
		case time.Now().After(deadline):
			b.Fatalf("%d of %d jobs terminated after %s", seen, n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// agentsCPUTime is the CPU time, user and system, that the processes pids
// used so far, with that of the children they waited for.
func agentsCPUTime(b *testing.B, pids []int) time.Duration {
	b.Helper()
	var ticks int64
	for _, pid := range pids {
		t, err := procCPUTicks(pid)
		if err != nil {
			b.Fatalf("agent %d: %v", pid, err)
		}
		ticks += t
		// Its children still running, the supervisors that stay for
		// their claims' jobs among them: what they used and waited for
		// is not yet the agent's.
		for _, c := range procChildren(pid) {
			if t, err := procCPUTicks(c); err == nil {
				ticks += t
			}
		}
	}
	// The kernel counts in USER_HZ, 100 a second on Linux.
	return time.Duration(ticks) * 10 * time.Millisecond
}

// procCPUTicks is the CPU time of pid and of what it waited for (utime,
// stime, cutime, cstime), in USER_HZ ticks.
func procCPUTicks(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's name, which is in parentheses:
	// utime, stime, cutime and cstime are the 14th to 17th of the line.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	var ticks int64
	for _, f := range fields[11:15] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	return ticks, nil
}

// procChildren lists the children of every thread of pid.
func procChildren(pid int) []int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, t := range tasks {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		for _, f := range strings.Fields(string(raw)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
