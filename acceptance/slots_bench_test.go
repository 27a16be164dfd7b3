package acceptance

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkPoolSlots sustains a pool of many slots through the real
// binary: nodes agents of slots slots each (the local provider), kept busy
// with short jobs for a while, the queue refilled in waves so that about
// one and a half times the slots stay idle behind the running jobs (each
// asking for 1 MiB of memory and 1 MiB of disk, so that a slot's share of
// the machine's fits however many there are). It
// reports the negotiator's cycle time (its ad's LastNegotiationCycleDuration0,
// sampled, and the mean of pond_negotiator_cycle_seconds), the jobs
// finished a second, how many slots were busy on average, and the memory
// of the agents (VmRSS and VmHWM from /proc, summed and the largest, the
// central manager's apart) and of their children (the claims' resident
// supervisors and their jobs). At the end the idle jobs left are removed,
// the running ones finish, and every job of the log must have one submit
// event and either one termination or one abort: none lost, none run twice.
// The jobs started more than once, and those with a shadow exception (a
// refused activation logs one, and no execute event), are counted, and
// the logs of such a run kept.
//
// The pools default to 2x10 (two agents of ten slots) for 60 s (20 s with
// -short); SLOTSBENCH_POOLS=10x100,100x100 sets them (NODESxSLOTS, comma
// separated), SLOTSBENCH_DURATION=10m the time each is kept busy and
// SLOTSBENCH_JOB="/bin/sleep 1" the job's command line. SLOTSBENCH_PROFILE=DIR
// starts the agents with -enable-debug and writes the central manager's
// heap and goroutine profiles into DIR at the end of the busy period
// (heap-NODESxSLOTS.pb.gz, goroutine-NODESxSLOTS.pb.gz; go tool pprof reads
// them). The jobs run as uids of their own, one a slot from 70000 (see
// slotsBenchUIDs). For example:
//
//	go build -o bin/pondctl ./cmd/pondctl && SLOTSBENCH_POOLS=100x100 SLOTSBENCH_DURATION=10m POND_BIN=$PWD/bin/pondctl go test -run '^$' -bench PoolSlots -benchtime 1x -timeout 60m ./acceptance/
func BenchmarkPoolSlots(b *testing.B) {
	pools := os.Getenv("SLOTSBENCH_POOLS")
	if pools == "" {
		pools = "2x10"
	}
	duration := 60 * time.Second
	if testing.Short() {
		duration = 20 * time.Second
	}
	if s := os.Getenv("SLOTSBENCH_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second {
			b.Fatalf("SLOTSBENCH_DURATION=%q: want a duration of at least 1s", s)
		}
		duration = d
	}
	job := strings.Fields(os.Getenv("SLOTSBENCH_JOB"))
	if len(job) == 0 {
		job = []string{"/bin/sleep", "1"}
	}
	for _, p := range strings.Split(pools, ",") {
		ns, ss, ok := strings.Cut(strings.TrimSpace(p), "x")
		nodes, err1 := strconv.Atoi(ns)
		slots, err2 := strconv.Atoi(ss)
		if !ok || err1 != nil || err2 != nil || nodes < 1 || slots < 1 {
			b.Fatalf("SLOTSBENCH_POOLS=%q: want NODESxSLOTS, comma separated, such as 10x100", pools)
		}
		b.Run(fmt.Sprintf("nodes=%d/slots=%d", nodes, slots), func(b *testing.B) {
			benchPoolSlots(b, nodes, slots, duration, job)
		})
	}
}

// slotsBenchUIDs is the first uid the pool's jobs run as (its startds run
// as root: each running job takes a uid of STARTER_SLOT_UIDS of its own,
// machine-wide). The default range, 584 uids, is fewer than the slots of
// a pool of 1,000 on one machine, whose activations beyond it would be
// refused; and other pools on the machine take uids of it. The pool's
// range, one uid a slot, is below the subordinate ids user namespaces
// are given (100000 up) and above the accounts'.
const slotsBenchUIDs = 70000

// slotsJobEvent matches the header of a job log event: its number, cluster
// and proc.
var slotsJobEvent = regexp.MustCompile(`^(\d{3}) \((\d+)\.(\d+)\.\d+\) `)

// jobLogTally counts a job log's events by job, reading only what was
// appended since it last looked.
type jobLogTally struct {
	path    string
	off     int64
	partial []byte
	// events is the count of each event number (000, 001, 005, ...) of
	// each job ("cluster.proc").
	events map[string]map[string]int
	// total is the count of each event number over all jobs.
	total map[string]int
}

func (l *jobLogTally) read(b *testing.B) {
	b.Helper()
	f, err := os.Open(l.path)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		b.Fatalf("reading the job log: %v", err)
	}
	defer f.Close()
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		b.Fatalf("reading the job log: %v", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		b.Fatalf("reading the job log: %v", err)
	}
	l.off += int64(len(data))
	data = append(l.partial, data...)
	cut := bytes.LastIndexByte(data, '\n') + 1
	for _, line := range bytes.Split(data[:cut], []byte("\n")) {
		m := slotsJobEvent.FindSubmatch(line)
		if m == nil {
			continue
		}
		ev, id := string(m[1]), string(m[2])+"."+string(m[3])
		if l.events[id] == nil {
			l.events[id] = map[string]int{}
		}
		l.events[id][ev]++
		l.total[ev]++
	}
	l.partial = append([]byte(nil), data[cut:]...)
}

// done is the number of jobs that left the queue: terminated or removed.
func (l *jobLogTally) done() int { return l.total["005"] + l.total["009"] }

func benchPoolSlots(b *testing.B, nodes, slots int, duration time.Duration, job []string) {
	b.StopTimer()
	total := nodes * slots
	w := newBenchWorkdir(b)
	profDir := os.Getenv("SLOTSBENCH_PROFILE")
	binary := ""
	if profDir != "" {
		// The agents serve Go's profiler: the local provider starts them
		// through a script that adds -enable-debug after "agent".
		w.writeExec("pond-debug.sh", fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = agent ]; then shift; exec %q agent -enable-debug \"$@\"; fi\nexec %q \"$@\"\n", pondBin, pondBin))
		binary = fmt.Sprintf("  binary             = %q\n", filepath.Join(w.dir, "pond-debug.sh"))
	}
	w.write("main.pond.hcl", fmt.Sprintf(`
provider "local" {
  max_nodes          = %d
  max_slots_per_node = %d
%s}
pool "big" {
  nodes  = %d
  slots  = %d
  config = { STARTER_SLOT_UIDS = "%d-%d" }
}
output "cm" {
  value = pool.big.central_manager
}
`, max(nodes, 64), max(slots, 256), binary, nodes, slots, slotsBenchUIDs, slotsBenchUIDs+total-1))
	load0 := loadAverage()
	start := time.Now()
	if r := w.runFor(30*time.Minute, "apply", "-auto-approve"); r.code != 0 {
		b.Fatalf("creating the pool: %s", r)
	}
	defer w.runFor(30*time.Minute, "destroy", "-auto-approve")
	b.Logf("%d agents of %d slots up in %s (load average %s)", nodes, slots, time.Since(start).Round(time.Second), load0)
	cm := w.output("cm")
	pids := agentPIDs(w.dir)
	if len(pids) != nodes {
		b.Fatalf("%d agents running, want %d", len(pids), nodes)
	}
	cmPID := agentPID(b, w, "big-0")
	eventually(b, 5*time.Minute, func() error {
		r := w.run("condor", "status", "-pool", cm, "-af", "Name")
		if got := strings.Count(r.stdout, "\n"); r.code != 0 || got < total {
			return fmt.Errorf("the collector holds %d of %d slots: %.300s", got, total, r)
		}
		return nil
	})

	args := ""
	if len(job) > 1 {
		args = "arguments = " + strings.Join(job[1:], " ") + "\n"
	}
	log := filepath.Join(w.dir, "slots.log")
	tally := &jobLogTally{path: log, events: map[string]map[string]int{}, total: map[string]int{}}
	// The queue's target: the running jobs and one and a half times the
	// slots idle behind them.
	target := total * 5 / 2
	submitted, waves := 0, 0
	var busySum, busySamples int
	cycles := map[string]float64{}
	var cycleMax float64
	cpu0 := agentsCPUTime(b, pids)
	begin := time.Now()
	b.StartTimer()
	nextNeg := time.Time{}
	for time.Since(begin) < duration {
		tally.read(b)
		if queued := submitted - tally.done(); queued < target-total/2 {
			n := target - queued
			waves++
			sub := fmt.Sprintf("wave%d.sub", waves)
			w.write(sub, fmt.Sprintf("executable = %s\n%stransfer_executable = false\nrequest_memory = 1\nrequest_disk = 1024\nlog = %s\nqueue %d\n", job[0], args, log, n))
			r := w.runFor(10*time.Minute, "condor", "submit", "-pool", cm, sub)
			if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("%d job(s) submitted", n)) {
				b.Fatalf("condor submit of wave %d: %s", waves, r)
			}
			submitted += n
		}
		busySum += tally.total["001"] - tally.total["005"] - tally.total["004"] - tally.total["009"]
		busySamples++
		if time.Now().After(nextNeg) {
			nextNeg = time.Now().Add(10 * time.Second)
			r := w.run("condor", "status", "-negotiator", "-pool", cm, "-af", "LastNegotiationCycleTime0", "LastNegotiationCycleDuration0", "LastNegotiationCycleMatches0")
			if f := strings.Fields(r.stdout); r.code == 0 && len(f) >= 3 {
				if d, err := strconv.ParseFloat(f[1], 64); err == nil {
					cycles[f[0]] = d
					cycleMax = max(cycleMax, d)
				}
			}
		}
		time.Sleep(time.Second)
	}
	tally.read(b)
	finished := tally.total["005"]
	elapsed := time.Since(begin)
	b.StopTimer()
	cpu := agentsCPUTime(b, pids) - cpu0
	load1 := loadAverage()
	mem := agentsMemory(b, pids, cmPID)
	if profDir != "" {
		for _, prof := range []string{"heap?gc=1", "goroutine"} {
			name := fmt.Sprintf("%s-%dx%d.pb.gz", strings.TrimSuffix(prof, "?gc=1"), nodes, slots)
			if err := saveAgentGet(w, cm, "/debug/pprof/"+prof, filepath.Join(profDir, name)); err != nil {
				b.Fatalf("the central manager's %s profile: %v", prof, err)
			}
			b.Logf("the central manager's %s profile: %s", prof, filepath.Join(profDir, name))
		}
	}
	negSum, negCount := negotiatorCycleMetric(b, w, cm)

	b.Logf("%d jobs submitted in %d waves, %d terminated in %s; %.0f slots of %d busy on average; %.1f ms of the agents' CPU a job",
		submitted, waves, finished, elapsed.Round(time.Second), float64(busySum)/float64(max(busySamples, 1)), total,
		float64(cpu.Microseconds())/1000/math.Max(float64(finished), 1))
	b.Logf("negotiator: %d cycles sampled, longest %.2f s, mean of all cycles %.3f s over %.0f cycles", len(cycles), cycleMax, negSum/math.Max(negCount, 1), negCount)
	b.Logf("memory: %s", mem)
	b.Logf("load average: %s before the pool, %s at the end", load0, load1)

	// The idle jobs go; the running ones finish. A job still queued
	// after that is one the schedd lost track of.
	rm := time.Now()
	// None may be left idle: condor rm says so and exits 1, as HTCondor's.
	if r := w.runFor(15*time.Minute, "condor", "rm", "-pool", cm, "-constraint", "JobStatus == 1"); r.code != 0 &&
		!strings.Contains(r.stderr, "Couldn't find/remove all jobs") {
		b.Fatalf("condor rm of the idle jobs: %s", r)
	}
	b.Logf("condor rm of the idle jobs took %s", time.Since(rm).Round(time.Second))
	drain := time.Now().Add(3 * time.Minute)
	for tally.read(b); tally.done() < submitted && time.Now().Before(drain); tally.read(b) {
		time.Sleep(time.Second)
	}
	time.Sleep(2 * time.Second)
	tally.read(b)
	// A job's activation the startd refused logs a shadow exception
	// (007) and no execute event: such a job is counted apart from
	// those that started more than once.
	var lost, twice, reran, excepted []string
	for id, ev := range tally.events {
		switch {
		case ev["000"] != 1 || ev["005"]+ev["009"] == 0:
			lost = append(lost, fmt.Sprintf("%s %v", id, ev))
		case ev["005"] > 1 || ev["005"]+ev["009"] > 1:
			twice = append(twice, fmt.Sprintf("%s %v", id, ev))
		case ev["001"] > 1:
			reran = append(reran, fmt.Sprintf("%s %v", id, ev))
		case ev["007"] > 0:
			excepted = append(excepted, fmt.Sprintf("%s %v", id, ev))
		}
	}
	sort.Strings(lost)
	sort.Strings(twice)
	sort.Strings(reran)
	sort.Strings(excepted)
	b.Logf("events: %v; %d removed idle at the end; %d started more than once (evicted and run again), the first: %q",
		tally.total, tally.total["009"], len(reran), reran[:min(len(reran), 10)])
	b.Logf("%d shadow exceptions (an activation refused, a starter lost) in %d jobs started once or never, the first: %q",
		tally.total["007"], len(excepted), excepted[:min(len(excepted), 10)])
	if len(lost)+len(twice)+len(reran)+len(excepted) > 0 {
		// Each such job's events, and the agents' logs, outlive the
		// pool: the job's id and its claim's (PondClaimId, in the
		// central manager's log) trace it through the agents' logs.
		dir := keepPoolLogs(b, w)
		var out strings.Builder
		for _, j := range slices.Concat(lost, twice, reran, excepted) {
			id, _, _ := strings.Cut(j, " ")
			fmt.Fprintf(&out, "job %s\n%s\n", j, jobLogEvents(b, log, id))
		}
		if dir != "" {
			if err := os.WriteFile(filepath.Join(dir, "jobs.txt"), []byte(out.String()), 0o644); err != nil {
				b.Errorf("writing the jobs' events: %v", err)
			}
			b.Logf("the events of the jobs never ended, ended twice, started more than once or with a shadow exception: %s", filepath.Join(dir, "jobs.txt"))
		}
		for _, j := range append(append([]string(nil), lost...), twice...) {
			id, _, _ := strings.Cut(j, " ")
			b.Logf("job %s's events:\n%s", id, jobLogEvents(b, log, id))
		}
	}
	if len(lost) > 0 {
		r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId", "ProcId", "JobStatus", "RemoteHost", "EnteredCurrentStatus")
		b.Errorf("%d jobs never ended (the queue: %.2000s): %.20q", len(lost), r.stdout, lost)
	}
	if len(twice) > 0 {
		b.Errorf("%d jobs ended twice: %.20q", len(twice), twice)
	}
	if finished == 0 {
		b.Errorf("no job finished in %s", elapsed.Round(time.Second))
	}
	if len(tally.events) != submitted {
		b.Errorf("%d jobs in the log, %d submitted", len(tally.events), submitted)
	}

	b.ReportMetric(float64(finished)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(tally.total["007"]), "shadow-exceptions")
	b.ReportMetric(float64(busySum)/float64(max(busySamples, 1))/float64(total), "busy-fraction")
	b.ReportMetric(negSum/math.Max(negCount, 1), "neg-cycle-mean-s")
	b.ReportMetric(cycleMax, "neg-cycle-max-s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/math.Max(float64(finished), 1), "agents-cpu-ms/job")
	b.ReportMetric(mem.rss/(1<<20), "agents-rss-MiB")
	b.ReportMetric(mem.hwm/(1<<20), "agents-hwm-MiB")
	b.ReportMetric(mem.maxHWM/(1<<20), "agent-max-hwm-MiB")
	b.ReportMetric(mem.cmHWM/(1<<20), "cm-hwm-MiB")
	b.ReportMetric(mem.childPSS/(1<<20), "children-pss-MiB")
}

// jobLogEvents returns the events of job id ("cluster.proc") in the job
// log at path, each with its body, as the log has them.
func jobLogEvents(b *testing.B, path, id string) string {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("reading the job log: %v", err)
	}
	var out strings.Builder
	in := false
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if m := slotsJobEvent.FindStringSubmatch(line); m != nil {
			in = m[2]+"."+m[3] == id
		}
		if in {
			out.WriteString(line)
		}
		if strings.HasPrefix(line, "...") {
			in = false
		}
	}
	return out.String()
}

// keepPoolLogs copies the job log and each agent's log (agent.log) of the
// pool out of the working directory, which the benchmark's end removes,
// into a directory of its own under the system's temporary directory,
// says where and returns it ("" when it could not).
func keepPoolLogs(b *testing.B, w *workdir) string {
	b.Helper()
	dst, err := os.MkdirTemp("", "slotsbench-")
	if err != nil {
		b.Errorf("keeping the pool's logs: %v", err)
		return ""
	}
	files, _ := filepath.Glob(filepath.Join(w.dir, ".pond", "local", "nodes", "*", "agent.log"))
	files = append(files, filepath.Join(w.dir, "slots.log"))
	for _, f := range files {
		rel, err := filepath.Rel(w.dir, f)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755)
		}
		var data []byte
		if err == nil {
			data, err = os.ReadFile(f)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, rel), data, 0o644)
		}
		if err != nil {
			b.Errorf("keeping the pool's logs: %v", err)
			return ""
		}
	}
	b.Logf("the job log and the agents' logs kept in %s", dst)
	return dst
}

// poolMemory is what the agents of a pool use, in bytes.
type poolMemory struct {
	rss, hwm, maxRSS, maxHWM float64
	cmRSS, cmHWM             float64
	// childRSS is the resident memory of the agents' children (the
	// claims' supervisors and their jobs), childAnon its private part
	// (RssAnon) and childPSS their proportional share of it (Pss, the
	// binary's pages they share divided among them); children counts
	// them.
	childRSS, childAnon, childPSS float64
	children                      int
	// threads counts the threads of the agents and of their children:
	// each takes one of the machine's process ids (kernel.pid_max).
	agentThreads, childThreads int
}

func (m poolMemory) String() string {
	const mib = 1 << 20
	return fmt.Sprintf("agents VmRSS %.0f MiB, VmHWM %.0f MiB summed, largest VmRSS %.0f MiB, VmHWM %.0f MiB; the central manager's VmRSS %.0f MiB, VmHWM %.0f MiB; %d children (supervisors and jobs) %.0f MiB VmRSS, %.0f MiB RssAnon, %.0f MiB Pss; threads: %d of the agents, %d of the children",
		m.rss/mib, m.hwm/mib, m.maxRSS/mib, m.maxHWM/mib, m.cmRSS/mib, m.cmHWM/mib, m.children, m.childRSS/mib, m.childAnon/mib, m.childPSS/mib, m.agentThreads, m.childThreads)
}

// agentsMemory reads VmRSS and VmHWM of every agent of pids, and the
// resident memory of their children.
func agentsMemory(b *testing.B, pids []int, cmPID int) poolMemory {
	b.Helper()
	var m poolMemory
	for _, pid := range pids {
		rss, hwm, err := procMemory(pid)
		if err != nil {
			b.Fatalf("agent %d: %v", pid, err)
		}
		m.rss += rss
		m.agentThreads += int(procKB(fmt.Sprintf("/proc/%d/status", pid), "Threads") / 1024)
		m.hwm += hwm
		m.maxRSS = max(m.maxRSS, rss)
		m.maxHWM = max(m.maxHWM, hwm)
		if pid == cmPID {
			m.cmRSS, m.cmHWM = rss, hwm
		}
		for _, c := range procChildren(pid) {
			if rss, _, err := procMemory(c); err == nil {
				m.childRSS += rss
				m.childAnon += procKB(fmt.Sprintf("/proc/%d/status", c), "RssAnon")
				m.childPSS += procKB(fmt.Sprintf("/proc/%d/smaps_rollup", c), "Pss")
				m.childThreads += int(procKB(fmt.Sprintf("/proc/%d/status", c), "Threads") / 1024)
				m.children++
			}
		}
	}
	return m
}

// procMemory is VmRSS and VmHWM of pid, in bytes.
func procMemory(pid int) (rss, hwm float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "VmRSS" && k != "VmHWM" {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			rss = kb * 1024
		} else {
			hwm = kb * 1024
		}
	}
	return rss, hwm, sc.Err()
}

// procKB is the field key of a /proc file of "key: N kB" lines, in
// bytes; 0 when the file or the field is missing (the process is gone).
func procKB(path, key string) float64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb * 1024
		}
	}
	return 0
}

// negotiatorCycleMetric is the sum and count of pond_negotiator_cycle_seconds
// in the central manager's /metrics.
func negotiatorCycleMetric(b *testing.B, w *workdir, cm string) (sum, count float64) {
	b.Helper()
	resp, err := w.agentGet(cm, "/metrics")
	if err != nil {
		b.Fatalf("the central manager's metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "pond_negotiator_cycle_seconds_sum":
			sum = v
		case "pond_negotiator_cycle_seconds_count":
			count = v
		}
	}
	if count == 0 {
		b.Fatalf("no pond_negotiator_cycle_seconds in the central manager's metrics (HTTP %d)", resp.StatusCode)
	}
	return sum, count
}

// saveAgentGet writes the body of a GET of path from the agent at api to
// file.
func saveAgentGet(w *workdir, api, path, file string) error {
	resp, err := w.agentGet(api, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, msg)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return f.Close()
}

// loadAverage is the machine's load averages over 1, 5 and 15 minutes.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
