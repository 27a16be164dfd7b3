package acceptance

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// partitionPoolConfig is the hub's pool "part" (see labPool): its central
// manager has two slots. Workers join it from the sites.
const partitionPoolConfig = `slots  = 2
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }`

// partitionSubmit queues six jobs of 20 s. Each writes, in its output,
// its proc, its scratch directory (named after the slot, so the node that
// ran it) and when it started, so that a stale copy's output is known.
// Their job lease is the claim lease (10 s): a worker cut off keeps them
// that long, and the schedd waits that long (and a renewal interval) to
// run them elsewhere.
const partitionSubmit = `
executable = /bin/sh
arguments  = "-c 'start=` + "`date +%s`" + `; sleep 20; echo done $(Process) $PWD $start'"
output     = out.$(Process)
log        = part.log
job_lease_duration = 10
queue 6
`

// partitionJobs is partitionSubmit's number of jobs.
const partitionJobs = 6

// partitionSetup is a pool whose central manager is in the lab's hub and
// two workers, "part-s1" in site 1 and "part-s2" in site 2 (routed), two
// slots each, running the six jobs of partitionSubmit, all at once.
type partitionSetup struct {
	lab    *netLab
	w      *workdir
	cm     string
	s1, s2 *labAgent
	// onS1 are the procs that run on part-s1.
	onS1 []int
}

// newPartitionSetup builds a partitionSetup whose site 1 is of variant
// s1: routed, part-s1 is reached directly; behind a firewall or NAT, it
// goes through the central manager as its relay (-reach auto).
func newPartitionSetup(t *testing.T, s1 siteVariant) *partitionSetup {
	lab := newNetLab(t, s1, siteRouted)
	w, cm, opts := labPool(t, lab, "part", partitionPoolConfig)
	opts.Knobs = map[string]string{"NUM_SLOTS": "2", "UPDATE_INTERVAL": "5"}
	p := &partitionSetup{lab: lab, w: w, cm: cm}
	logOnFailure(t, w, cm, func() []*labAgent { return []*labAgent{p.s1, p.s2} })
	p.s1 = lab.Sites[0].startAgent(t, w, "part-s1", opts)
	p.s2 = lab.Sites[1].startAgent(t, w, "part-s2", opts)
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "status", "-pool", p.cm, "-af", "Machine")
		if r.code != 0 {
			return fmt.Errorf("condor status: %s", r)
		}
		for _, m := range []string{"part-0", "part-s1", "part-s2"} {
			if !strings.Contains(r.stdout, m) {
				return fmt.Errorf("%s has no slot in the pool yet:\n%s", m, r.stdout)
			}
		}
		return nil
	})

	w.write("part.sub", partitionSubmit)
	w.expect(0, "condor", "submit", "-pool", p.cm, "part.sub")
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", p.cm, "-constraint", "JobStatus == 2", "-af", "ProcId", "RemoteHost")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		p.onS1 = nil
		running := 0
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			running++
			if strings.HasSuffix(strings.Trim(f[1], `"`), "@part-s1") {
				proc, _ := strconv.Atoi(f[0])
				p.onS1 = append(p.onS1, proc)
			}
		}
		if running < partitionJobs || len(p.onS1) == 0 {
			return fmt.Errorf("%d of %d jobs running, %d on part-s1", running, partitionJobs, len(p.onS1))
		}
		return nil
	})
	// The jobs have started on part-s1.
	eventually(t, 10*time.Second, func() error {
		if n := len(descendants(p.s1.PID())); n < len(p.onS1) {
			return fmt.Errorf("%d processes under part-s1's agent, want at least %d", n, len(p.onS1))
		}
		return nil
	})
	return p
}

// waitDone waits until the queue is empty.
func (p *partitionSetup) waitDone(t *testing.T, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() error {
		r := p.w.run("condor", "q", "-pool", p.cm, "-af", "ProcId", "JobStatus")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		if left := strings.Count(r.stdout, "\n"); left > 0 {
			return fmt.Errorf("%d jobs still queued", left)
		}
		return nil
	})
}

// output is job proc's output file: proc, scratch directory and the Unix
// time it started.
func (p *partitionSetup) output(t *testing.T, proc int) (dir string, start time.Time) {
	t.Helper()
	got := readFile(t, filepath.Join(p.w.dir, fmt.Sprintf("out.%d", proc)))
	f := strings.Fields(got)
	if len(f) != 4 || f[0] != "done" || f[1] != strconv.Itoa(proc) {
		t.Errorf("out.%d = %q, want done %d DIR START", proc, got, proc)
		return "", time.Time{}
	}
	sec, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		t.Errorf("out.%d = %q: %v", proc, got, err)
	}
	return f[2], time.Unix(sec, 0)
}

// TestPartitionRequeuesOnce cuts the link of a worker running jobs for
// longer than their job lease (job_lease_duration 10 s, the claim lease:
// ALIVE_INTERVAL 2 s × MAX_CLAIM_ALIVES_MISSED 5): the cut-off worker
// kills its copies when it has not renewed their claims for the lease,
// the schedd requeues each job once after the lease, and the jobs complete
// elsewhere. Healed after the lease, the worker rejoins; no job has two
// terminate events and no output is a stale copy's.
func TestPartitionRequeuesOnce(t *testing.T) {
	t.Parallel()
	partitionRequeuesOnce(t, newPartitionSetup(t, siteRouted))
}

// TestRelayedPartitionRequeuesOnce is TestPartitionRequeuesOnce with
// part-s1 behind NAT, reached through the central manager as its relay:
// the cut drops its tunnel too. Its jobs are requeued once after the
// lease, its stale copies killed, and healed, it attaches to its relay
// again; no job terminates twice.
func TestRelayedPartitionRequeuesOnce(t *testing.T) {
	t.Parallel()
	p := newPartitionSetup(t, siteNAT)
	relayed := func() error {
		reach, _ := seaMembersReach(t, p.w, p.cm)
		if reach["part-s1"] != (memberReach{Reach: "reverse", Relay: "part-0"}) || reach["part-s2"] != (memberReach{Reach: "direct"}) {
			return fmt.Errorf("reach %v", reach)
		}
		return nil
	}
	if err := relayed(); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	partitionRequeuesOnce(t, p)
	eventually(t, 30*time.Second, relayed)
	eventually(t, 30*time.Second, func() error {
		var ws []api.RelayWorker
		r := p.w.run("sea", "relays", "-json", "-sea", p.cm)
		if err := json.Unmarshal([]byte(r.stdout), &ws); err != nil || len(ws) != 1 || ws[0].Name != "part-s1" || !ws[0].Connected {
			return fmt.Errorf("part-s1's tunnel is not attached again: %v\n%s", err, r)
		}
		return nil
	})
}

// partitionRequeuesOnce cuts part-s1's link for longer than the claim
// lease, heals it, and checks what TestPartitionRequeuesOnce says.
func partitionRequeuesOnce(t *testing.T, p *partitionSetup) {
	site := p.lab.Sites[0]
	logPath := filepath.Join(p.w.dir, "part.log")
	time.Sleep(2 * time.Second)
	site.Cut()
	cut := time.Now()
	t.Logf("cut part-s1 off, running procs %v", p.onS1)

	// Cut off, the worker keeps running its jobs until its lease ends
	// (the schedd may have renewed it just before the cut) ...
	time.Sleep(5 * time.Second)
	if n := len(descendants(p.s1.PID())); n == 0 {
		t.Errorf("part-s1 stopped its jobs %s after the cut, before its job lease ran out", time.Since(cut).Round(time.Millisecond))
	}
	// ... then kills them, before the schedd lets the jobs run elsewhere.
	var killed, requeued time.Duration
	eventually(t, 60*time.Second, func() error {
		if killed == 0 && len(descendants(p.s1.PID())) == 0 {
			killed = time.Since(cut)
		}
		if requeued == 0 && total(logEvents(t, logPath)["024"]) >= len(p.onS1) {
			requeued = time.Since(cut)
		}
		if killed == 0 || requeued == 0 {
			return fmt.Errorf("stale copies killed after %s, jobs requeued after %s", killed, requeued)
		}
		return nil
	})
	t.Logf("partition to the stale copies killed: %s; to the requeue: %s", killed.Round(100*time.Millisecond), requeued.Round(100*time.Millisecond))
	if killed > requeued+time.Second {
		t.Errorf("the schedd requeued the jobs (%s after the cut) before the cut-off worker killed its copies (%s)", requeued, killed)
	}
	if !strings.Contains(readFile(t, filepath.Join(p.s1.Dir, "agent.log")), "killing a job whose job lease ran out") {
		t.Error("part-s1's log does not say it killed its jobs for their lease")
	}
	requeueTime := cut.Add(requeued)

	// Healed after the lease: the worker comes back into the pool.
	site.Heal()
	p.waitDone(t, 150*time.Second)
	eventually(t, 60*time.Second, func() error {
		r := p.w.run("sea", "members", "-sea", p.cm, "-json")
		var members []struct{ Name, Status string }
		if err := json.Unmarshal([]byte(r.stdout), &members); err != nil {
			return fmt.Errorf("sea members: %v\n%s", err, r)
		}
		for _, m := range members {
			if m.Name == "part-s1" && m.Status == "alive" {
				return nil
			}
		}
		return fmt.Errorf("part-s1 is not an alive member: %s", r.stdout)
	})
	eventually(t, 60*time.Second, func() error {
		r := p.w.run("condor", "status", "-pool", p.cm, "-af", "Machine")
		if !strings.Contains(r.stdout, "part-s1") {
			return fmt.Errorf("part-s1 has no slot in the pool after the heal: %s", r)
		}
		return nil
	})

	counts := logEvents(t, logPath)
	lost := map[int]bool{}
	for _, proc := range p.onS1 {
		lost[proc] = true
	}
	for proc := range partitionJobs {
		if n := counts["005"][proc]; n != 1 {
			t.Errorf("job 1.%d has %d terminate events, want 1", proc, n)
		}
		want := 0
		if lost[proc] {
			want = 1
		}
		if n := counts["024"][proc]; n != want {
			t.Errorf("job 1.%d has %d reconnect-failed events, want %d", proc, n, want)
		}
		if n := counts["022"][proc]; n != want {
			t.Errorf("job 1.%d has %d disconnected events, want %d", proc, n, want)
		}
		if n := counts["004"][proc]; n != 0 {
			t.Errorf("job 1.%d has %d evicted events: a stale copy's report was taken", proc, n)
		}
		dir, start := p.output(t, proc)
		if lost[proc] && start.Before(requeueTime.Add(-time.Second)) {
			t.Errorf("out.%d is from a copy started at %s (in %s), before the requeue at %s: the stale copy's",
				proc, start.Format(time.TimeOnly), dir, requeueTime.Format(time.TimeOnly))
		}
	}
	t.Logf("events: 022 %v, 023 %v, 024 %v, 005 %v", counts["022"], counts["023"], counts["024"], counts["005"])
	// Back from the partition, part-s1 may gossip the deaths it saw
	// meanwhile: the central manager's agent does not believe them once
	// the accused answers.
	if n := strings.Count(readFile(t, filepath.Join(p.w.dir, ".pond", "local", "nodes", "part-0", "agent.log")), "answered again"); n > 0 {
		t.Logf("the central manager saw %d false failure(s) refuted", n)
	}
	if t.Failed() {
		t.Logf("partition at %s, healed after %s\n%s", cut.Format("15:04:05.000"), requeued, readFile(t, logPath))
	}
}

// TestShortPartitionKeepsJobs cuts a worker's link twice while it runs
// jobs, for less than the claim lease (10 s) each time: for 2 s, then, two
// renewals (4 s) after the heal, for 5 s. Its jobs are not requeued and
// each completes once, with the output of the copy that ran through the
// partitions. What the lease must cover is the time from the worker's last
// renewal before a cut to its first one after the heal: up to an
// ALIVE_INTERVAL (2 s) before the cut, the cut, and up to an interval after
// it, when the next renewal goes out on a fresh connection; so a cut
// shorter than the lease less two intervals (6 s) keeps the jobs whatever
// the phase of the renewals, a longer one only by luck.
func TestShortPartitionKeepsJobs(t *testing.T) {
	t.Parallel()
	p := newPartitionSetup(t, siteRouted)
	site := p.lab.Sites[0]
	logPath := filepath.Join(p.w.dir, "part.log")
	time.Sleep(2 * time.Second)
	cutAt := time.Now()
	for i, cut := range []time.Duration{2 * time.Second, 5 * time.Second} {
		if i > 0 {
			time.Sleep(4 * time.Second)
		}
		site.Cut()
		time.Sleep(cut)
		site.Heal()
	}
	p.waitDone(t, 120*time.Second)

	counts := logEvents(t, logPath)
	for proc := range partitionJobs {
		if n := counts["005"][proc]; n != 1 {
			t.Errorf("job 1.%d has %d terminate events, want 1", proc, n)
		}
		if n := counts["001"][proc]; n != 1 {
			t.Errorf("job 1.%d has %d execute events, want 1: it ran again", proc, n)
		}
		if n := counts["024"][proc]; n != 0 {
			t.Errorf("job 1.%d was requeued after partitions within its lease", proc)
		}
		if _, start := p.output(t, proc); !start.Before(cutAt) {
			t.Errorf("out.%d is from a copy started at %s, after the first partition", proc, start.Format(time.TimeOnly))
		}
	}
	// A 022 (disconnected) is written if the sea declared the node failed
	// meanwhile; pond writes no 023 (reconnected) yet.
	t.Logf("events: 022 %v, 023 %v", counts["022"], counts["023"])
}

// TestPartitionStaleReportRefused cuts a worker off a few seconds before
// its jobs end: they end while it is cut off, before its claim lease runs
// out, and their outputs and reports wait for the link. The schedd
// requeues the jobs after the lease; healed after that, the worker tries
// to deliver the stale copies' outputs and reports, which the schedd
// refuses (it no longer holds their claims): each job terminates once, is
// never evicted by a stale report, and its output is the second copy's.
func TestPartitionStaleReportRefused(t *testing.T) {
	t.Parallel()
	p := newPartitionSetup(t, siteRouted)
	site := p.lab.Sites[0]
	logPath := filepath.Join(p.w.dir, "part.log")
	// The jobs of 20 s have all run for less than 20 s (they all run)
	// and for a few seconds: cut 13 s from now, they end in the cut.
	time.Sleep(13 * time.Second)
	site.Cut()
	cut := time.Now()
	var requeued time.Time
	eventually(t, 60*time.Second, func() error {
		if n := total(logEvents(t, logPath)["024"]); n < len(p.onS1) {
			return fmt.Errorf("%d of %d jobs requeued", n, len(p.onS1))
		}
		requeued = time.Now()
		return nil
	})
	t.Logf("requeued %s after the cut", requeued.Sub(cut).Round(100*time.Millisecond))
	site.Heal()
	// Each stale copy tries to deliver its outputs and report, and the
	// schedd turns it away (HTTP 404: it holds no such claim any more),
	// at its outputs, its claim's renewal or its report.
	eventually(t, 30*time.Second, func() error {
		refused := staleRefusals(readFile(t, filepath.Join(p.s1.Dir, "agent.log")))
		for _, proc := range p.onS1 {
			if !refused[proc] {
				return fmt.Errorf("part-s1's stale copy of job 1.%d has not been refused yet (refused: %v)", proc, refused)
			}
		}
		return nil
	})
	if strings.Contains(readFile(t, filepath.Join(p.s1.Dir, "agent.log")), "killing a job whose job lease ran out") {
		t.Error("part-s1 killed a job for its lease: the jobs did not end within it, the test proves nothing")
	}
	p.waitDone(t, 120*time.Second)
	counts := logEvents(t, logPath)
	for _, proc := range p.onS1 {
		if n := counts["005"][proc]; n != 1 {
			t.Errorf("job 1.%d has %d terminate events, want 1", proc, n)
		}
		if n := counts["024"][proc]; n != 1 {
			t.Errorf("job 1.%d has %d reconnect-failed events, want 1", proc, n)
		}
		if n := counts["004"][proc]; n != 0 {
			t.Errorf("job 1.%d has %d evicted events: a stale copy's report was taken", proc, n)
		}
		if dir, start := p.output(t, proc); start.Before(cut) {
			t.Errorf("out.%d is the stale copy's (started %s in %s, before the cut)", proc, start.Format(time.TimeOnly), dir)
		}
	}
}

// TestHealedPartitionFalseFailures heals a worker's link just after the
// worker, cut off, declared another worker failed: back, it gossips that
// death (packets it sent into the cut arrive too), and the sea believes it
// until the accused, alive all along, refutes it. The central manager must
// not take the healthy worker for lost meanwhile: its jobs get no
// disconnected event and its slots stay in the collector.
func TestHealedPartitionFalseFailures(t *testing.T) {
	t.Parallel()
	p := newPartitionSetup(t, siteRouted)
	site := p.lab.Sites[0]
	logPath := filepath.Join(p.w.dir, "part.log")
	site.Cut()
	eventually(t, 30*time.Second, func() error {
		if !strings.Contains(readFile(t, filepath.Join(p.s1.Dir, "agent.log")), "EventMemberFailed: part-s2") {
			return fmt.Errorf("part-s1 has not declared part-s2 failed yet")
		}
		return nil
	})
	site.Heal()
	healed := time.Now()
	// For the next seconds, part-s2 stays in the pool.
	for time.Since(healed) < 5*time.Second {
		r := p.w.run("condor", "status", "-pool", p.cm, "-af", "Machine")
		if r.code == 0 && !strings.Contains(r.stdout, "part-s2") {
			t.Errorf("%s after the heal, part-s2, never cut off, has no slot in the collector", time.Since(healed).Round(100*time.Millisecond))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	p.waitDone(t, 120*time.Second)
	counts := logEvents(t, logPath)
	cmLog := readFile(t, filepath.Join(p.w.dir, ".pond", "local", "nodes", "part-0", "agent.log"))
	t.Logf("the central manager's serf declared part-s2 failed %d time(s); %d refuted failure(s)",
		strings.Count(cmLog, "EventMemberFailed: part-s2"), strings.Count(cmLog, "answered again"))
	onS1 := map[int]bool{}
	for _, proc := range p.onS1 {
		onS1[proc] = true
	}
	for proc := range partitionJobs {
		if n := counts["005"][proc]; n != 1 {
			t.Errorf("job 1.%d has %d terminate events, want 1", proc, n)
		}
		if n := counts["022"][proc]; n > 0 && !onS1[proc] {
			t.Errorf("job 1.%d, never on the cut-off worker, has %d disconnected events", proc, n)
		}
	}
}

// staleRefusalLogs are what a startd logs when the schedd turns away a
// job's copy whose claim it gave up: its report, its outputs, or the
// renewal of its claim while it sends them.
var staleRefusalLogs = []string{
	"schedd refused job report",
	"not reporting a job whose claim its schedd no longer holds",
}

// staleRefusals lists the procs (of cluster 1) whose stale copies a
// startd's log says the schedd refused.
func staleRefusals(log string) map[int]bool {
	procs := map[int]bool{}
	for _, line := range strings.Split(log, "\n") {
		if !slices.ContainsFunc(staleRefusalLogs, func(m string) bool { return strings.Contains(line, m) }) {
			continue
		}
		for _, f := range strings.Fields(line) {
			if id, ok := strings.CutPrefix(f, "job=1."); ok {
				if proc, err := strconv.Atoi(id); err == nil {
					procs[proc] = true
				}
			}
		}
	}
	return procs
}
