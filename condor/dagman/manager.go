package dagman

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
)

// SubmitRequest is one submission of a node's job: the submit file read
// from Dir, Macros defined before the file is read (VARS ... PREPEND),
// and Lines added after its statements, before its queue statement
// (VARS, and the DAG's own settings: the log, the node's attributes).
type SubmitRequest struct {
	Node       string
	SubmitFile string
	Dir        string
	Macros     map[string]string
	Lines      []string
	// SubDAG is true for a SUBDAG EXTERNAL node: SubmitFile is then the
	// nested DAG's file, to be run by a DAG manager job of its own (the
	// Lines set its DAGManJobId to this DAG's job).
	SubDAG bool
}

// Submitted is what a submission queued: a cluster and its job count.
type Submitted struct {
	Cluster int
	Jobs    int
}

// SubmitResult is the outcome of one request of a SubmitBatch.
type SubmitResult struct {
	Submitted
	Err error
}

// QueuedNode is a node's cluster the schedd holds, found by Queued.
type QueuedNode struct {
	Node    string
	Cluster int
	Jobs    int
}

// Options tune a Manager.
type Options struct {
	// Submit queues a node's jobs through pond's submit path (unless
	// SubmitBatch is set); Remove removes a cluster's jobs (when the
	// DAG aborts).
	Submit func(ctx context.Context, req SubmitRequest) (Submitted, error)
	Remove func(ctx context.Context, cluster int) error
	// SubmitBatch, when set, queues the jobs of several nodes at once
	// (at most BatchSize), a cluster each, in one transaction of the
	// schedd, and returns their results in order: the requests that
	// reached the schedd were committed all together or not at all.
	SubmitBatch func(ctx context.Context, reqs []SubmitRequest) []SubmitResult
	// BatchSize bounds the nodes of one SubmitBatch (DefaultBatchSize
	// when 0).
	BatchSize int
	// Queued, when set, is asked by recovery for the clusters of this
	// DAG's nodes (their DAGManNodesLog is nodesLog) that the schedd
	// queued but whose submit events the nodes' log lacks (the schedd
	// was stopped between its commit and its events): those in its
	// queue, and those among history that already left it.
	Queued func(ctx context.Context, nodesLog string, history []int) ([]QueuedNode, error)
	// MaxJobs bounds the nodes with jobs in the queue, MaxIdle the idle
	// jobs, MaxPre and MaxPost the scripts running at once; 0 is no bound.
	MaxJobs, MaxIdle, MaxPre, MaxPost int
	// DAGManJobID is the cluster of the DAG manager's own job (0 when run
	// in the foreground): the nodes' DAGManJobId.
	DAGManJobID int
	// Env is the environment of the scripts.
	Env []string
	// MaxSubmitsPerInterval bounds the nodes submitted between two reads
	// of the nodes' log; 0 is no bound.
	MaxSubmitsPerInterval int
	// BatchName is the nodes' jobs' batch name (JobBatchName): the DAG
	// manager's job's, so that condor q shows them as one batch.
	BatchName string
	// Poll is the longest wait between two reads of the nodes' log
	// (100ms when 0): the log is read as soon as it grows.
	Poll time.Duration
	// Out receives the dagman.out lines too (besides FILE.dag.dagman.out).
	Out io.Writer
	// NoRescue ignores existing rescue DAGs.
	NoRescue bool
	// Removed, when it is closed or receives, says the DAG manager's own
	// job was removed: the nodes' jobs are removed, a rescue DAG is
	// written and Run returns 1.
	Removed <-chan struct{}
}

// state of a node.
type state int

const (
	notReady state = iota
	ready
	preRun
	submitted
	postRun
	done
	failed
)

var stateNames = [...]string{"NOT_READY", "READY", "PRERUN", "SUBMITTED", "POSTRUN", "DONE", "ERROR"}

func (s state) String() string { return stateNames[s] }

type nodeRun struct {
	n       *Node
	st      state
	retries int // retries used
	cluster int
	jobs    int // procs of the cluster
	ended   map[int]bool
	idle    map[int]bool
	held    int  // procs held
	ret     int  // the job's (worst) exit value
	jobFail bool // a proc failed
	preRet  int
	msg     string
	defer_  time.Time
	// submitFails counts the failed submissions of the current try.
	submitFails int
	// waiting counts the parents not done.
	waiting int
}

type scriptResult struct {
	node string
	post bool
	code int
	err  error
	out  string
}

// Manager runs one DAG.
type Manager struct {
	d     *DAG
	opts  Options
	runs  map[string]*nodeRun
	order []*nodeRun
	byCl  map[int]*nodeRun
	out   io.Writer
	logf  string // the nodes' job event log
	off   int64
	pre   int
	post  int
	res   chan scriptResult
	abort *int
	final bool // the FINAL node has been started
	// removed says a node's job was removed with the DAG manager's own
	// job (its OtherJobRemoveRequirements): the DAG's removal, which the
	// schedd's signal may not have told yet.
	removed bool
	// pendingEvents are the events recovery read, applied by the loop.
	pendingEvents []joblog.Event
	// cnt are the throttles' counts, kept by schedule and submit.
	cnt counts
	// submits counts this interval's submissions.
	submits int
	// statusAt and statusSig are when the node status (and the updated
	// DOT file) was last written, and a digest of the states it showed.
	statusAt  time.Time
	statusSig uint64
}

// counts are what the throttles bound: nodes with jobs in the queue,
// idle jobs, and nodes in the queue by category.
type counts struct {
	inQueue, idle int
	cat           map[string]int
}

// Paths of a DAG's files.
func outPath(dag string) string           { return dag + ".dagman.out" }
func nodesLog(dag string) string          { return dag + ".nodes.log" }
func lockPath(dag string) string          { return dag + ".lock" }
func rescuePath(dag string, n int) string { return fmt.Sprintf("%s.rescue%03d", dag, n) }

// maxSubmitAttempts bounds a node's submissions that fail before the
// node fails, as DAGMAN_MAX_SUBMIT_ATTEMPTS does.
const maxSubmitAttempts = 6

// maxRescue bounds the rescue DAG's number, as DAGMan's
// DAGMAN_MAX_RESCUE_NUM does.
const maxRescue = 100

// NewestRescue returns the number of the DAG file's newest rescue DAG
// (FILE.dag.rescueNNN), 0 when there is none.
func NewestRescue(dag string) int {
	best := 0
	matches, _ := filepath.Glob(dag + ".rescue[0-9][0-9][0-9]")
	for _, m := range matches {
		n, err := strconv.Atoi(m[len(m)-3:])
		if err == nil && n > best && n <= maxRescue {
			best = n
		}
	}
	return best
}

// applyRescue marks the nodes a rescue DAG names DONE.
func applyRescue(d *DAG, path string) (int, error) {
	text, err := readBounded(path)
	if err != nil {
		return 0, err
	}
	count := 0
	for i, line := range strings.Split(string(text), "\n") {
		t := fields(line)
		if len(t) == 0 || strings.HasPrefix(t[0].s, "#") {
			continue
		}
		le := lineErr{path, i + 1}
		if !strings.EqualFold(t[0].s, "DONE") || len(t) != 2 {
			return 0, le.at(t[0].col, "a rescue DAG holds only DONE lines, not %q", strings.TrimSpace(line))
		}
		n := d.Node(t[1].s)
		if n == nil {
			return 0, le.at(t[1].col, "unknown node %s (the rescue DAG is of another DAG?)", t[1].s)
		}
		if !n.Final {
			n.Done = true
			count++
		}
	}
	return count, nil
}

// Run runs the DAG of the file dagFile to its end: the newest rescue DAG
// beside it marks nodes done; a lock file left by a manager that did not
// finish makes this one recover: it reads the nodes' job event log from
// where that run started, so that no node is submitted twice. It returns
// the DAG's exit code: 0 when every node succeeded, 1 when a node failed
// (a rescue DAG is written), the ABORT-DAG-ON return code when aborted.
func Run(ctx context.Context, dagFile string, opts Options) (int, error) {
	dagFile, err := filepath.Abs(dagFile)
	if err != nil {
		return 1, err
	}
	d, err := ParseFile(dagFile)
	if err != nil {
		return 1, err
	}
	if opts.Submit == nil && opts.SubmitBatch == nil {
		return 1, errors.New("no submit function")
	}
	cfg, err := ReadConfig(d)
	if err != nil {
		return 1, err
	}
	f, err := os.OpenFile(outPath(dagFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 1, err
	}
	defer f.Close()
	var out io.Writer = f
	if opts.Out != nil {
		out = io.MultiWriter(f, opts.Out)
	}
	m := &Manager{d: d, opts: opts, runs: map[string]*nodeRun{}, byCl: map[int]*nodeRun{}, out: out,
		logf: nodesLog(dagFile), res: make(chan scriptResult, 16)}
	m.printf("******************************************************")
	m.printf("** pond DAG manager starting up: %s (pid %d)", dagFile, os.Getpid())
	m.configure(cfg)

	recovering, err := m.lock(dagFile)
	if err != nil {
		return 1, err
	}
	if !recovering && !opts.NoRescue {
		if r := NewestRescue(dagFile); r > 0 {
			k, err := applyRescue(d, rescuePath(dagFile, r))
			if err != nil {
				return 1, err
			}
			m.printf("Using rescue DAG %s: %d node(s) done", rescuePath(dagFile, r), k)
		}
	}
	for _, n := range d.Nodes {
		r := &nodeRun{n: n}
		if n.Done {
			r.st = done
		}
		m.runs[n.Name] = r
		m.order = append(m.order, r)
	}
	for _, r := range m.order {
		for _, p := range r.n.Parents {
			if m.runs[p].st != done {
				r.waiting++
			}
		}
	}
	if recovering {
		if err := m.recover(ctx); err != nil {
			return 1, err
		}
	}
	if d.Dot != nil {
		if err := m.writeDot(); err != nil {
			m.printf("ERROR writing the DOT file: %v", err)
		}
	}
	code, err := m.loop(ctx)
	if err != nil {
		return code, err
	}
	m.writeStatus(true, code)
	if m.unfinished() {
		// Even when a FINAL node's success made the DAG succeed, the
		// nodes not done are left to a rescue DAG.
		if err := m.writeRescue(dagFile); err != nil {
			m.printf("ERROR writing the rescue DAG: %v", err)
		}
	}
	m.printf("** pond DAG manager exiting with status %d", code)
	os.Remove(lockPath(dagFile))
	return code, nil
}

// lock writes FILE.dag.lock with this process's pid and the nodes' log
// offset this run starts at. A lock of a live process is an error (the
// DAG is running); one of a dead process means recovery from its offset.
func (m *Manager) lock(dagFile string) (bool, error) {
	path := lockPath(dagFile)
	if b, err := os.ReadFile(path); err == nil {
		var pid int
		var off int64
		if _, err := fmt.Sscanf(string(b), "%d %d", &pid, &off); err != nil {
			return false, fmt.Errorf("lock file %s: unreadable (%v): remove it if no DAG manager runs this DAG", path, err)
		}
		if pid != os.Getpid() && syscall.Kill(pid, 0) == nil && !isZombie(pid) {
			return false, fmt.Errorf("the DAG %s is already being run by process %d (lock file %s)", dagFile, pid, path)
		}
		m.off = off
		m.printf("Lock file %s of process %d found: recovering from the nodes' log %s at byte %d", path, pid, m.logf, off)
		return true, os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", os.Getpid(), off), 0o644)
	}
	if st, err := os.Stat(m.logf); err == nil {
		m.off = st.Size()
	}
	return false, os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", os.Getpid(), m.off), 0o644)
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

// configure applies the CONFIG file's knobs where the command line set
// none, and warns of the knobs it does not act on.
func (m *Manager) configure(c Config) {
	o := &m.opts
	for _, k := range []struct {
		opt *int
		v   int
	}{{&o.MaxJobs, c.MaxJobs}, {&o.MaxIdle, c.MaxIdle}, {&o.MaxPre, c.MaxPre}, {&o.MaxPost, c.MaxPost},
		{&o.MaxSubmitsPerInterval, c.MaxSubmitsPerInterval}} {
		if *k.opt == 0 {
			*k.opt = k.v
		}
	}
	if o.Poll <= 0 {
		o.Poll = cmp.Or(c.ScanInterval, 100*time.Millisecond)
	}
	for _, ig := range c.Ignored {
		m.printf("WARNING: %s is not a knob pond's DAG manager acts on: ignored", ig)
	}
	if m.d.Config != "" {
		m.printf("CONFIG %s: maxjobs %d, maxidle %d, maxpre %d, maxpost %d, max submits per interval %d, log scan interval %s",
			m.d.Config, o.MaxJobs, o.MaxIdle, o.MaxPre, o.MaxPost, o.MaxSubmitsPerInterval, o.Poll)
	}
}

// writeStatus writes the node status file and, with DOT ... UPDATE, the
// DOT file, when their minimum update time has passed and a node changed
// (or always, with ALWAYS-UPDATE), and at the DAG's end.
func (m *Manager) writeStatus(end bool, code int) {
	statusFile := m.d.NodeStatusFile != ""
	dotUpdate := m.d.Dot != nil && m.d.Dot.Update
	if !statusFile && !dotUpdate {
		return
	}
	interval := time.Second
	if statusFile {
		interval = m.d.NodeStatusInterval
	}
	if !end && time.Since(m.statusAt) < interval {
		return
	}
	sig := uint64(14695981039346656037)
	for _, r := range m.order {
		for _, v := range []int{int(r.st), r.retries, len(r.idle), r.held, len(r.ended)} {
			sig = (sig ^ uint64(v)) * 1099511628211
		}
	}
	if !end && sig == m.statusSig && !m.d.NodeStatusAlways {
		return
	}
	m.statusAt, m.statusSig = time.Now(), sig
	if statusFile {
		if err := m.writeNodeStatus(end, code); err != nil {
			m.printf("ERROR writing the node status file: %v", err)
		}
	}
	if dotUpdate {
		if err := m.writeDot(); err != nil {
			m.printf("ERROR writing the DOT file: %v", err)
		}
	}
}

func (m *Manager) printf(format string, a ...any) {
	fmt.Fprintf(m.out, "%s %s\n", time.Now().Format("01/02/06 15:04:05"), fmt.Sprintf(format, a...))
}

// recover replays the nodes' log of the interrupted run: nodes whose
// jobs were submitted are SUBMITTED with their cluster (their events
// applied as they come), retries are counted.
func (m *Manager) recover(ctx context.Context) error {
	var evs []joblog.Event
	off := m.off
	if _, err := os.Stat(m.logf); err == nil {
		if evs, off, err = joblog.ReadFile(m.logf, m.off, nil); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, ev := range evs {
		if ev.Type == joblog.Submit {
			name := dagNode(ev)
			r := m.runs[name]
			if r == nil || ev.Proc != 0 {
				continue
			}
			if r.cluster != 0 && r.cluster != ev.Cluster {
				r.retries++
				delete(m.byCl, r.cluster)
			}
			r.st, r.cluster, r.jobs = submitted, ev.Cluster, 0
			r.ended, r.idle, r.ret, r.jobFail = map[int]bool{}, map[int]bool{}, 0, false
			m.byCl[ev.Cluster] = r
			m.printf("Recovered node %s: job cluster %d", name, ev.Cluster)
		}
	}
	// Count each recovered cluster's jobs from its submit events.
	for _, ev := range evs {
		if r := m.byCl[ev.Cluster]; r != nil && r.cluster == ev.Cluster && ev.Type == joblog.Submit {
			r.jobs++
			r.idle[ev.Proc] = true
		}
	}
	if err := m.recoverQueued(ctx, evs); err != nil {
		return err
	}
	// The nodes recovered as submitted are not ready to start again;
	// the other events are applied by the loop.
	m.pendingEvents = evs
	m.off = off
	return nil
}

// recoverQueued adopts the clusters the schedd committed for nodes whose
// submit events the log lacks: a batch is committed in one transaction
// and its submit events are written after it, so a stop in between
// leaves nodes queued that the log does not show.
func (m *Manager) recoverQueued(ctx context.Context, evs []joblog.Event) error {
	if m.opts.Queued == nil {
		return nil
	}
	var orphans []int
	seen := map[int]bool{}
	for _, ev := range evs {
		if m.byCl[ev.Cluster] == nil && !seen[ev.Cluster] {
			seen[ev.Cluster] = true
			orphans = append(orphans, ev.Cluster)
		}
	}
	qs, err := m.opts.Queued(ctx, m.logf, orphans)
	if err != nil {
		return fmt.Errorf("recovering: asking the schedd for the nodes' clusters: %w", err)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Cluster < qs[j].Cluster })
	for _, q := range qs {
		r := m.runs[q.Node]
		if r == nil || m.byCl[q.Cluster] != nil || q.Jobs <= 0 || r.st == done || r.cluster > q.Cluster {
			continue
		}
		if r.cluster != 0 && r.cluster != q.Cluster {
			r.retries++
			delete(m.byCl, r.cluster)
		}
		r.st, r.cluster, r.jobs = submitted, q.Cluster, q.Jobs
		r.ended, r.idle, r.ret, r.jobFail = map[int]bool{}, map[int]bool{}, 0, false
		for p := range q.Jobs {
			r.idle[p] = true
		}
		m.byCl[q.Cluster] = r
		m.printf("Recovered node %s: job cluster %d, queued without a submit event in the nodes' log", q.Node, q.Cluster)
	}
	return nil
}

// dagNode is the node a submit event's "DAG Node: NAME" note names.
func dagNode(ev joblog.Event) string {
	for _, l := range append([]string{ev.Notes}, ev.Body...) {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "DAG Node:"); ok {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

func (m *Manager) loop(ctx context.Context) (int, error) {
	t := time.NewTicker(m.opts.Poll)
	defer t.Stop()
	for {
		if evs := m.pendingEvents; evs != nil {
			m.pendingEvents = nil
			for _, ev := range evs {
				m.event(ctx, ev)
			}
		}
		if err := m.readLog(ctx); err != nil {
			return 1, err
		}
		if m.removed {
			return m.removeDAG(ctx), nil
		}
		m.submits = 0
		m.schedule(ctx)
		if code, over := m.over(ctx); over {
			return code, nil
		}
		m.writeStatus(false, 0)
		select {
		case <-ctx.Done():
			m.printf("Stopped: %v (the DAG recovers when run again)", ctx.Err())
			return 1, ctx.Err()
		case r := <-m.res:
			m.script(ctx, r)
		case <-m.opts.Removed:
			return m.removeDAG(ctx), nil
		case <-t.C:
		}
	}
}

// removeDAG removes the nodes' jobs once the DAG manager's own job was
// removed, and returns Run's exit code.
func (m *Manager) removeDAG(ctx context.Context) int {
	m.printf("The DAG manager's job was removed: removing the nodes' jobs")
	m.stopAll(ctx)
	return 1
}

// removedWithRe matches the reason a schedd gives a job removed by
// another's OtherJobRemoveRequirements (pond's and HTCondor's words),
// capturing the other's cluster.
var removedWithRe = regexp.MustCompile(`OtherJobRemoveRequirements.* fired when job \(?(\d+)\.\d+\)? was removed`)

// removedWithDAG says whether a node job's abort reason is the removal
// of the DAG manager's own job.
func (m *Manager) removedWithDAG(reason string) bool {
	g := removedWithRe.FindStringSubmatch(reason)
	return m.opts.DAGManJobID > 0 && g != nil && g[1] == strconv.Itoa(m.opts.DAGManJobID)
}

func (m *Manager) readLog(ctx context.Context) error {
	// Only a log that grew is read.
	if st, err := os.Stat(m.logf); errors.Is(err, os.ErrNotExist) || err == nil && st.Size() <= m.off {
		return nil
	}
	evs, off, err := joblog.ReadFile(m.logf, m.off, nil)
	if err != nil {
		return err
	}
	m.off = off
	for _, ev := range evs {
		m.event(ctx, ev)
	}
	return nil
}

// event applies one job event of the nodes' log.
func (m *Manager) event(ctx context.Context, ev joblog.Event) {
	r := m.byCl[ev.Cluster]
	if r == nil && ev.Type == joblog.Submit && ev.Proc == 0 {
		// A submission whose answer was lost (the schedd queued it but
		// the submit failed) is adopted, never submitted again.
		if o := m.runs[dagNode(ev)]; o != nil && o.st == ready && !o.running() && o.submitFails > 0 {
			o.st, o.cluster, o.jobs = submitted, ev.Cluster, 1
			o.ended, o.idle, o.jobFail, o.ret = map[int]bool{}, map[int]bool{0: true}, false, 0
			m.byCl[ev.Cluster] = o
			m.printf("Node %s: adopted cluster %d, queued by a submission that reported failure", o.n.Name, ev.Cluster)
		}
		return
	}
	if r == nil || r.cluster != ev.Cluster || r.st != submitted || r.ended[ev.Proc] {
		return
	}
	switch ev.Type {
	case joblog.Execute:
		delete(r.idle, ev.Proc)
	case joblog.Evicted, joblog.JobReconnectFailed:
		r.idle[ev.Proc] = true
	case joblog.Held:
		r.held++
		m.printf("Node %s job %d.%d held: %s", r.n.Name, ev.Cluster, ev.Proc, ev.Message)
	case joblog.Released:
		r.held = max(r.held-1, 0)
	case joblog.Terminated:
		r.ended[ev.Proc] = true
		delete(r.idle, ev.Proc)
		r.held = 0
		v := ev.ReturnValue
		if !ev.TerminatedNormally {
			v = -ev.Signal
		}
		if v != 0 && !r.jobFail {
			r.jobFail, r.ret = true, v
		}
		m.printf("Node %s job %d.%d completed (return value %d)", r.n.Name, ev.Cluster, ev.Proc, v)
	case joblog.Aborted:
		r.ended[ev.Proc] = true
		delete(r.idle, ev.Proc)
		if m.removedWithDAG(ev.Message) {
			// Not the node's failure: the DAG's removal (loop).
			m.printf("Node %s job %d.%d removed with the DAG: %s", r.n.Name, ev.Cluster, ev.Proc, ev.Message)
			m.removed = true
			return
		}
		if !r.jobFail {
			r.jobFail, r.ret = true, -1
		}
		m.printf("Node %s job %d.%d removed: %s", r.n.Name, ev.Cluster, ev.Proc, ev.Message)
	}
	if r.jobs > 0 && len(r.ended) >= r.jobs {
		m.jobDone(ctx, r)
	}
}

// jobDone: the node's jobs all ended; its POST script runs, or it
// succeeds or fails by them.
func (m *Manager) jobDone(ctx context.Context, r *nodeRun) {
	delete(m.byCl, r.cluster)
	if r.n.Post != nil {
		r.st = postRun
		return // schedule starts it within -maxpost
	}
	if r.jobFail {
		m.fail(r, r.ret, fmt.Sprintf("job %d failed with return value %d", r.cluster, r.ret))
		return
	}
	m.succeed(r)
}

func (m *Manager) succeed(r *nodeRun) {
	r.st = done
	for _, c := range r.n.Children {
		m.runs[c].waiting--
	}
	m.printf("Node %s succeeded", r.n.Name)
	if a := r.n.AbortOn; a != nil && a.Value == 0 {
		m.abortDAG(r, 0)
	}
}

// fail handles a failure of node r with value v: ABORT-DAG-ON, RETRY, or
// the node is in error.
func (m *Manager) fail(r *nodeRun, v int, why string) {
	m.printf("Node %s failed: %s", r.n.Name, why)
	if a := r.n.AbortOn; a != nil && a.Value == v {
		r.st, r.msg = failed, why
		m.abortDAG(r, v)
		return
	}
	if r.retries < r.n.Retry && !(r.n.RetryUnlessExit != nil && *r.n.RetryUnlessExit == v) && m.abort == nil {
		r.retries++
		m.printf("Retrying node %s (retry %d of %d)", r.n.Name, r.retries, r.n.Retry)
		r.st = ready
		return
	}
	r.st, r.msg = failed, why
}

func (m *Manager) abortDAG(r *nodeRun, v int) {
	if m.abort != nil {
		return
	}
	code := v
	if r.n.AbortOn.HasReturn {
		code = r.n.AbortOn.Return
	}
	code = min(max(code, 0), 255)
	m.abort = &code
	m.printf("Aborting the DAG: node %s exited with %d (ABORT-DAG-ON); the DAG exits with %d", r.n.Name, v, code)
}

// schedule starts what may start: ready nodes' PRE scripts or jobs,
// within the throttles and by priority, POST scripts within -maxpost.
func (m *Manager) schedule(ctx context.Context) {
	if m.abort != nil {
		m.stopAll(ctx)
	}
	// Nodes become ready when all their parents are done.
	if m.abort == nil {
		for _, r := range m.order {
			if r.st == notReady && !r.n.Final && r.waiting <= 0 {
				r.st = ready
			}
		}
	}
	for _, r := range m.order {
		if r.st == postRun && !r.running() && (m.opts.MaxPost == 0 || m.post < m.opts.MaxPost) && time.Now().After(r.defer_) {
			m.startScript(ctx, r, true)
		}
	}
	if m.abort != nil {
		return
	}
	var rs []*nodeRun
	for _, r := range m.order {
		if r.st == ready && time.Now().After(r.defer_) {
			rs = append(rs, r)
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].n.Priority > rs[j].n.Priority })
	m.count()
	var subs []*nodeRun
	for _, r := range rs {
		if r.n.Pre != nil && !r.preDone() {
			if !r.running() && (m.opts.MaxPre == 0 || m.pre < m.opts.MaxPre) {
				m.startScript(ctx, r, false)
			}
			continue
		}
		subs = append(subs, r)
	}
	m.submitAll(ctx, subs)
}

// running and preDone keep a node's script state in its msg-free fields.
func (r *nodeRun) running() bool { return r.msg == "\x00running" }
func (r *nodeRun) preDone() bool { return r.msg == "\x00pre-done" }

// count takes the throttles' counts from the nodes' states; submit
// keeps them as it submits.
func (m *Manager) count() {
	m.cnt = counts{cat: map[string]int{}}
	for _, o := range m.order {
		if o.st == submitted {
			m.cnt.inQueue++
			m.cnt.idle += len(o.idle)
			if o.n.Category != "" {
				m.cnt.cat[o.n.Category]++
			}
		}
	}
}

func (m *Manager) throttled(r *nodeRun) bool {
	if m.opts.MaxSubmitsPerInterval > 0 && m.submits >= m.opts.MaxSubmitsPerInterval {
		return true
	}
	if m.opts.MaxJobs > 0 && m.cnt.inQueue >= m.opts.MaxJobs || m.opts.MaxIdle > 0 && m.cnt.idle >= m.opts.MaxIdle {
		return true
	}
	if lim, ok := m.d.MaxJobs[r.n.Category]; ok && r.n.Category != "" && lim > 0 && m.cnt.cat[r.n.Category] >= lim {
		return true
	}
	return false
}

// DefaultBatchSize is the nodes submitted together, in one transaction
// of the schedd, when Options.BatchSize is 0.
const DefaultBatchSize = 200

// batches splits n items into consecutive [start, end) ranges of at most
// size items each.
func batches(n, size int) [][2]int {
	size = max(size, 1)
	var out [][2]int
	for i := 0; i < n; i += size {
		out = append(out, [2]int{i, min(i+size, n)})
	}
	return out
}

// submitWorkers bounds the submissions of one pass that run at once.
const submitWorkers = 4

func (m *Manager) submit(ctx context.Context, r *nodeRun) { m.submitAll(ctx, []*nodeRun{r}) }

// submitAll submits the jobs of the nodes rs that the throttles let go,
// up to submitWorkers at once, and applies the results in rs's order
// (NOOP nodes are done without a job).
func (m *Manager) submitAll(ctx context.Context, rs []*nodeRun) {
	type submission struct {
		r   *nodeRun
		req SubmitRequest
		s   Submitted
		err error
	}
	var subs []*submission
	for _, r := range rs {
		if r.n.Noop {
			r.msg = ""
			m.printf("Node %s is NOOP: not submitted", r.n.Name)
			r.ended, r.idle, r.jobFail, r.ret = map[int]bool{}, map[int]bool{}, false, 0
			if r.n.Post != nil {
				r.st = postRun
				continue
			}
			m.succeed(r)
			continue
		}
		if m.throttled(r) {
			continue
		}
		// The node counts against the throttles from now on; a failed
		// submission gives its place back.
		m.reserve(r, 1)
		subs = append(subs, &submission{r: r, req: m.request(r)})
	}
	if m.opts.SubmitBatch != nil {
		size := cmp.Or(m.opts.BatchSize, DefaultBatchSize)
		for _, b := range batches(len(subs), size) {
			part := subs[b[0]:b[1]]
			reqs := make([]SubmitRequest, len(part))
			for i, sub := range part {
				reqs[i] = sub.req
			}
			res := m.opts.SubmitBatch(ctx, reqs)
			for i, sub := range part {
				if i < len(res) {
					sub.s, sub.err = res[i].Submitted, res[i].Err
				} else {
					sub.err = fmt.Errorf("the batch answered %d of %d nodes", len(res), len(reqs))
				}
				m.submitted(ctx, sub.r, sub.req, sub.s, sub.err)
			}
		}
		return
	}
	sem := make(chan struct{}, submitWorkers)
	var wg sync.WaitGroup
	for _, sub := range subs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			sub.s, sub.err = m.opts.Submit(ctx, sub.req)
		}()
	}
	wg.Wait()
	for _, sub := range subs {
		m.submitted(ctx, sub.r, sub.req, sub.s, sub.err)
	}
}

// reserve counts node r against the throttles (sign -1 gives its place
// back).
func (m *Manager) reserve(r *nodeRun, sign int) {
	m.submits += sign
	m.cnt.inQueue += sign
	m.cnt.idle += sign
	if r.n.Category != "" {
		m.cnt.cat[r.n.Category] += sign
	}
}

// submitted applies the result of node r's submission.
func (m *Manager) submitted(ctx context.Context, r *nodeRun, req SubmitRequest, s Submitted, err error) {
	r.msg = ""
	if err != nil {
		m.reserve(r, -1)
		r.submitFails++
		if r.submitFails < maxSubmitAttempts {
			r.defer_ = time.Now().Add(time.Duration(r.submitFails) * 2 * time.Second)
			m.printf("Submitting node %s failed (attempt %d of %d), trying again: %v", r.n.Name, r.submitFails, maxSubmitAttempts, err)
			if r.n.Pre != nil {
				r.msg = "\x00pre-done" // the PRE script is not run again
			}
			return
		}
		r.submitFails = 0
		m.fail(r, -1, fmt.Sprintf("submitting %s: %v", req.SubmitFile, err))
		return
	}
	r.submitFails = 0
	r.st, r.cluster, r.jobs = submitted, s.Cluster, s.Jobs
	r.ended, r.idle, r.jobFail, r.ret = map[int]bool{}, map[int]bool{}, false, 0
	for p := range s.Jobs {
		r.idle[p] = true
	}
	m.byCl[s.Cluster] = r
	m.cnt.idle += s.Jobs - 1
	m.printf("Submitted node %s: %d job(s) in cluster %d", r.n.Name, s.Jobs, s.Cluster)
	if s.Jobs == 0 {
		m.jobDone(ctx, r)
	}
}

// request is the submission of node r: its VARS, the nodes' log, its
// DAG attributes, as DAGMan passes them to condor_submit. The node's own
// log, if its submit file names one, is written too: the schedd writes
// the job's events to both (DAGManNodesLog).
func (m *Manager) request(r *nodeRun) SubmitRequest {
	dir := r.n.Dir
	base := filepath.Dir(m.d.File)
	if dir == "" {
		dir = base
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	sub := r.n.SubmitFile
	if !filepath.IsAbs(sub) {
		sub = filepath.Join(dir, sub)
	}
	req := SubmitRequest{Node: r.n.Name, SubmitFile: sub, Dir: dir, Macros: map[string]string{}, SubDAG: r.n.SubDAG}
	subst := func(v string) string {
		v = strings.ReplaceAll(v, "$(JOB)", r.n.Name)
		return strings.ReplaceAll(v, "$(RETRY)", strconv.Itoa(r.retries))
	}
	for _, v := range r.n.Vars {
		val := subst(v.Value)
		switch {
		case strings.HasPrefix(v.Name, "+") || len(v.Name) > 3 && strings.EqualFold(v.Name[:3], "My."):
			req.Lines = append(req.Lines, fmt.Sprintf("%s = %s", v.Name, val))
		case v.Prepend:
			req.Macros[v.Name] = val
		default:
			req.Lines = append(req.Lines, fmt.Sprintf("%s = %s", v.Name, val))
		}
	}
	parents := slices.Clone(r.n.Parents)
	req.Lines = append(req.Lines,
		"+DAGManNodesLog = "+quote(m.logf),
		"submit_event_notes = DAG Node: "+r.n.Name,
		"+DAGNodeName = "+quote(r.n.Name),
		"+DAGManJobId = "+strconv.Itoa(m.opts.DAGManJobID),
		"+DAGParentNodeNames = "+quote(strings.Join(parents, ",")),
		"+DAGNodeRetry = "+strconv.Itoa(r.retries),
	)
	if m.opts.BatchName != "" {
		req.Lines = append(req.Lines, "batch_name = "+m.opts.BatchName)
	}
	return req
}

// quote is a ClassAd string literal of s.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// startScript runs node r's PRE (post false) or POST script.
func (m *Manager) startScript(ctx context.Context, r *nodeRun, post bool) {
	sc, kind := r.n.Pre, "PRE"
	if post {
		sc, kind = r.n.Post, "POST"
	}
	dir := r.n.Dir
	if dir == "" {
		dir = filepath.Dir(m.d.File)
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(m.d.File), dir)
	}
	failedCount := 0
	for _, o := range m.order {
		if o.st == failed {
			failedCount++
		}
	}
	jobID := ""
	if r.cluster != 0 {
		jobID = fmt.Sprintf("%d.0", r.cluster)
	}
	rep := strings.NewReplacer("$JOBID", jobID, "$JOB", r.n.Name, "$RETURN", strconv.Itoa(r.ret),
		"$RETRY", strconv.Itoa(r.retries), "$MAX_RETRIES", strconv.Itoa(r.n.Retry),
		"$PRE_SCRIPT_RETURN", strconv.Itoa(r.preRet), "$DAG_STATUS", "0", "$FAILED_COUNT", strconv.Itoa(failedCount))
	exe := rep.Replace(sc.Exe)
	args := make([]string, len(sc.Args))
	for i, a := range sc.Args {
		args[i] = rep.Replace(a)
	}
	if !filepath.IsAbs(exe) && strings.Contains(exe, "/") || fileExists(filepath.Join(dir, exe)) {
		exe = filepath.Join(dir, exe)
	}
	r.msg = "\x00running"
	if post {
		m.post++
	} else {
		m.pre++
	}
	m.printf("Running %s script of node %s: %s %s", kind, r.n.Name, exe, strings.Join(args, " "))
	go func() {
		cmd := exec.CommandContext(ctx, exe, args...)
		cmd.Dir, cmd.Env = dir, m.opts.Env
		outp, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code, err = ee.ExitCode(), nil
			if code < 0 {
				code = -int(ee.Sys().(syscall.WaitStatus).Signal())
			}
		case err != nil:
			code = -1
		}
		m.res <- scriptResult{node: r.n.Name, post: post, code: code, err: err, out: string(outp[:min(len(outp), 4096)])}
	}()
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// script applies a finished script's result.
func (m *Manager) script(ctx context.Context, s scriptResult) {
	r := m.runs[s.node]
	r.msg = ""
	kind := "PRE"
	if s.post {
		m.post--
		kind = "POST"
	} else {
		m.pre--
	}
	sc0 := bufio.NewScanner(strings.NewReader(s.out))
	for sc0.Scan() {
		m.printf("  %s %s: %s", kind, r.n.Name, sc0.Text())
	}
	if s.err != nil {
		m.printf("%s script of node %s could not run: %v", kind, r.n.Name, s.err)
	} else {
		m.printf("%s script of node %s exited with %d", kind, r.n.Name, s.code)
	}
	sc := r.n.Pre
	if s.post {
		sc = r.n.Post
	}
	if sc.Deferred && s.code == sc.DeferStatus && m.abort == nil {
		r.defer_ = time.Now().Add(sc.DeferTime)
		m.printf("%s script of node %s deferred for %s", kind, r.n.Name, sc.DeferTime)
		return
	}
	if !s.post {
		r.preRet = s.code
		if r.n.PreSkip != nil && *r.n.PreSkip == s.code {
			m.printf("Node %s: PRE_SKIP %d: node done without its job", r.n.Name, s.code)
			m.succeed(r)
			return
		}
		if s.code != 0 {
			m.fail(r, s.code, fmt.Sprintf("PRE script exited with %d", s.code))
			return
		}
		r.msg = "\x00pre-done"
		m.count()
		m.submit(ctx, r)
		return
	}
	if s.code != 0 {
		m.fail(r, s.code, fmt.Sprintf("POST script exited with %d", s.code))
		return
	}
	m.succeed(r)
}

// stopAll removes the jobs of the submitted nodes of an aborted DAG.
func (m *Manager) stopAll(ctx context.Context) {
	for _, r := range m.order {
		// The FINAL node runs to its end even when the DAG aborted.
		if r.st == submitted && !r.n.Final && m.opts.Remove != nil {
			if err := m.opts.Remove(ctx, r.cluster); err != nil {
				m.printf("ERROR removing node %s's cluster %d: %v", r.n.Name, r.cluster, err)
			}
			r.st, r.msg = failed, "removed: the DAG was aborted"
			delete(m.byCl, r.cluster)
		}
	}
}

// over reports whether the DAG is at its end, and its exit code; the
// FINAL node is started once the others are finished.
func (m *Manager) over(ctx context.Context) (int, bool) {
	busy := m.pre > 0 || m.post > 0
	for _, r := range m.order {
		if r.n.Final {
			continue
		}
		switch r.st {
		case submitted, postRun, preRun:
			busy = true
		case ready:
			if m.abort == nil {
				busy = true
			}
		}
	}
	if busy {
		return 0, false
	}
	f := m.d.Final
	if f != nil {
		fr := m.runs[f.Name]
		switch {
		case !m.final:
			m.final = true
			m.printf("Starting the FINAL node %s", f.Name)
			fr.st = ready
			return 0, false
		case fr.st != done && fr.st != failed:
			// The FINAL node runs even when the DAG aborted.
			if m.abort != nil && fr.st == ready {
				if fr.n.Pre != nil && !fr.preDone() {
					if !fr.running() {
						m.startScript(ctx, fr, false)
					}
				} else {
					m.count()
					m.submit(ctx, fr)
				}
			}
			return 0, false
		}
	}
	nFailed, nDone := 0, 0
	for _, r := range m.order {
		switch r.st {
		case done:
			nDone++
		case failed:
			nFailed++
		}
	}
	m.printf("%d node(s) done, %d failed, %d not run, of %d", nDone, nFailed, len(m.order)-nDone-nFailed, len(m.order))
	if f != nil {
		// The FINAL node's outcome is the DAG's.
		if m.runs[f.Name].st != done {
			return cmp.Or(derefOr(m.abort, 1), 1), true // an abort with RETURN 0 still fails
		}
		return derefOr(m.abort, 0), true
	}
	if m.abort != nil {
		return *m.abort, true
	}
	if nFailed > 0 || nDone < len(m.order) {
		return 1, true
	}
	return 0, true
}

// unfinished reports whether a node other than the FINAL one is not done.
func (m *Manager) unfinished() bool {
	for _, r := range m.order {
		if !r.n.Final && r.st != done {
			return true
		}
	}
	return false
}

func derefOr(p *int, v int) int {
	if p == nil {
		return v
	}
	return *p
}

// writeRescue writes FILE.dag.rescueNNN: a DONE line for each node done
// (the FINAL node is never done in a rescue DAG).
func (m *Manager) writeRescue(dagFile string) error {
	n := NewestRescue(dagFile) + 1
	if n > maxRescue {
		n = maxRescue
	}
	path := rescuePath(dagFile, n)
	var b strings.Builder
	fmt.Fprintf(&b, "# Rescue DAG file, created after running\n#   the %s DAG file\n# Created %s\n", dagFile, time.Now().UTC().Format(time.RFC3339))
	var failedNodes []string
	total, nDone := 0, 0
	for _, r := range m.order {
		if r.n.Final {
			continue
		}
		total++
		if r.st == done {
			nDone++
		}
		if r.st == failed {
			failedNodes = append(failedNodes, r.n.Name)
		}
	}
	fmt.Fprintf(&b, "#\n# Total number of nodes: %d\n# Nodes premarked DONE: %d\n# Nodes that failed: %d\n#   %s\n\n",
		total, nDone, len(failedNodes), strings.Join(failedNodes, ","))
	for _, r := range m.order {
		if r.st == done && !r.n.Final {
			fmt.Fprintf(&b, "DONE %s\n", r.n.Name)
		}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	m.printf("Wrote the rescue DAG %s", path)
	return nil
}
