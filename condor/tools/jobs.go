package tools

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

func currentUser(env []string) string {
	if u := getenv(env, "USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "nobody"
}

// Submit is condor_submit reading a submit description from standard
// input when no file (or "-") is given: SubmitInput with os.Stdin.
func Submit(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	return SubmitInput(ctx, args, os.Stdin, stdout, stderr, env)
}

// SubmitInput is condor_submit: it parses the submit description file
// (stdin when none or "-" is given; errors name file:line:col), has the
// schedd reserve a cluster, expands the file into the cluster's job ads
// (mistakes are reported before anything is queued), has the schedd
// store them and prints "Submitting job(s)" with a dot per job and "N
// job(s) submitted to cluster C.", or with -terse "C.P - C.P", the first
// and last job. NAME=value arguments are extra macros; -append LINE
// adds a line just before the queue statement, -batch-name NAME sets
// batch_name so, and -queue ARGS is the queue statement of a file that
// has none (it takes every argument after it).
func SubmitInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env []string) int {
	const tool = "condor_submit"
	c, err := parseArgs(args, specSubmit, env, true)
	if err != nil {
		return fail(stderr, tool, err)
	}
	macros := map[string]string{}
	var file string
	for _, a := range c.rest {
		if k, v, ok := strings.Cut(a, "="); ok && a != "-" {
			macros[strings.TrimSpace(k)] = strings.TrimSpace(v)
		} else if file == "" {
			file = a
		} else {
			return fail(stderr, tool, fmt.Errorf("more than one submit file given (%s, %s)", file, a))
		}
	}
	// The working directory is PWD when the caller sets it (pondctl does,
	// honouring -chdir), else the process's own.
	cwd := getenv(env, "PWD")
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	var text []byte
	if file == "" || file == "-" {
		file = "<stdin>"
		if stdin == nil {
			return fail(stderr, tool, errors.New("no submit file given and no standard input"))
		}
		if text, err = io.ReadAll(io.LimitReader(stdin, maxSubmitText+1)); err != nil {
			return fail(stderr, tool, fmt.Errorf("reading the submit description from standard input: %w", err))
		}
		if len(text) > maxSubmitText {
			return fail(stderr, tool, fmt.Errorf("the submit description on standard input is larger than %d bytes", maxSubmitText))
		}
	} else {
		if !filepath.IsAbs(file) {
			file = filepath.Join(cwd, file)
		}
		if text, err = os.ReadFile(file); err != nil {
			return fail(stderr, tool, err)
		}
	}
	f, err := submit.Parse(file, text)
	if err != nil {
		return fail(stderr, tool, err)
	}
	if f, err = withCommandLine(f, file, text, c); err != nil {
		return fail(stderr, tool, err)
	}
	for _, w := range f.Warnings() {
		fmt.Fprintln(stderr, w.String())
	}
	sc, _, err := scheddOf(ctx, c, env)
	if err != nil {
		return fail(stderr, tool, err)
	}
	opts := submit.Options{Owner: currentUser(env), SubmitDir: cwd, Env: env, Macros: macros,
		LookupEnv: func(n string) (string, bool) { return lookupEnv(env, n) }, CheckExecutable: submit.CheckExecutable, CheckLog: submit.CheckLog}
	resp, err := SubmitFile(ctx, sc, f, opts)
	terse := c.flags["terse"] != ""
	if resp != nil && !terse {
		// The file expanded: the schedd was asked to commit its jobs.
		// A dot per job, one for a job factory's digest.
		dots := resp.Jobs
		if resp.Factory {
			dots = 1
		}
		fmt.Fprintln(stdout, "Submitting job(s)"+strings.Repeat(".", dots))
	}
	if err != nil {
		return fail(stderr, tool, err)
	}
	if terse {
		if resp.Jobs > 0 {
			fmt.Fprintf(stdout, "%d.0 - %d.%d\n", resp.Cluster, resp.Cluster, resp.Jobs-1)
		}
		return 0
	}
	fmt.Fprintf(stdout, "%d job(s) submitted to cluster %d.\n", resp.Jobs, resp.Cluster)
	return 0
}

// maxSubmitText bounds a submit description read from standard input.
const maxSubmitText = 64 << 20

// withCommandLine applies condor_submit's -batch-name, -append and
// -queue to the parsed file f of text: the lines -append and -batch-name
// give go just before the first queue statement (at the end of a file
// without one), and -queue's arguments make the queue statement of a
// file that has none. f itself when none of them is given.
func withCommandLine(f *submit.File, name string, text []byte, c *common) (*submit.File, error) {
	extra := append([]string(nil), c.multi["append"]...)
	if bn, ok := c.flags["batch-name"]; ok {
		extra = append(extra, "batch_name = "+bn)
	}
	q, hasQueue := c.flags["queue"]
	if len(extra) == 0 && !hasQueue {
		return f, nil
	}
	for _, l := range extra {
		if strings.ContainsAny(l, "\n\r") {
			return nil, fmt.Errorf("-append %q: a line cannot hold a line break", l)
		}
	}
	queues := f.Queues()
	if hasQueue {
		if len(queues) > 0 {
			return nil, fmt.Errorf("-queue %s: %s already has a queue statement (line %d)", q, name, queues[0].Line)
		}
		extra = append(extra, "queue "+q)
	}
	lines := strings.SplitAfter(string(text), "\n")
	at := len(lines)
	if len(queues) > 0 {
		at = queues[0].Line - 1
	}
	if at > 0 && !strings.HasSuffix(lines[at-1], "\n") {
		lines[at-1] += "\n"
	}
	var b strings.Builder
	for _, l := range lines[:at] {
		b.WriteString(l)
	}
	for _, l := range extra {
		b.WriteString(l + "\n")
	}
	for _, l := range lines[at:] {
		b.WriteString(l)
	}
	return submit.Parse(name, []byte(b.String()))
}

// SubmitFile does condor_submit's work for a parsed submit file: it has
// the schedd sc reserve a cluster, expands f for it with opts (the
// cluster and the schedd's name, UID_DOMAIN and FILESYSTEM_DOMAIN come
// from the schedd, and so does the Owner when the schedd authenticated
// the caller) and has the schedd commit the jobs. A mistake in the
// file is reported before anything is queued, with a nil response; the
// reserved cluster then stays empty.
//
// A commit whose answer is lost (connection refused, reset or closed, a
// timeout, a server error) is sent again until the schedd answers or a
// minute has passed: the schedd commits a cluster's jobs once and
// answers a repeat with what it committed, so asking again is how the
// submitter learns the outcome. When the commit fails, the response
// names the cluster and no jobs, and the error is a *CommitError that
// says whether the jobs were queued: not at all (the schedd refused
// them), or unknown (the schedd never answered).
func SubmitFile(ctx context.Context, sc *wire.Schedd, f *submit.File, opts submit.Options) (*wire.SubmitResponse, error) {
	nc, err := sc.NewCluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("reserving a cluster: %w", err)
	}
	opts.ClusterID, opts.FirstProc, opts.ScheddName = nc.Cluster, 0, nc.ScheddName
	// The schedd gives the jobs the Owner it authenticated.
	opts.Owner = cmp.Or(nc.Owner, opts.Owner)
	opts.UIDDomain = cmp.Or(nc.UIDDomain, opts.UIDDomain)
	opts.FileSystemDomain = cmp.Or(nc.FileSystemDomain, opts.FileSystemDomain)
	maxMat, maxIdle, err := f.MaterializeLimits()
	if err != nil {
		return nil, err
	}
	var send func(context.Context) (*wire.SubmitResponse, error)
	if maxMat > 0 || maxIdle > 0 {
		// Late materialization: the schedd keeps the file's factory and
		// makes the jobs as earlier ones leave the queue.
		fa, err := f.NewFactory(ctx, opts)
		if err != nil {
			return nil, err
		}
		digest, err := fa.Digest()
		if err != nil {
			return nil, err
		}
		req := &wire.SubmitFactoryRequest{Cluster: nc.Cluster, Digest: digest, MaxMaterialize: maxMat, MaxIdle: maxIdle}
		send = func(ctx context.Context) (*wire.SubmitResponse, error) { return sc.SubmitFactory(ctx, req) }
	} else if req, err := digestSubmit(ctx, f, opts, nc.Cluster); err != nil {
		return nil, err
	} else if req != nil {
		// Many jobs: the schedd makes them from the file's digest as it
		// stores them, and neither side holds all their ads.
		send = func(ctx context.Context) (*wire.SubmitResponse, error) { return sc.SubmitDigest(ctx, req) }
	} else {
		jobs, err := f.Jobs(ctx, opts)
		if err != nil {
			return nil, err
		}
		req := &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: jobs}
		send = func(ctx context.Context) (*wire.SubmitResponse, error) { return sc.Submit(ctx, req) }
	}
	resp, err := commit(ctx, sc, nc.Cluster, send, submitCommit)
	if err != nil {
		return &wire.SubmitResponse{Cluster: nc.Cluster}, err
	}
	return resp, nil
}

// DigestSubmitMin is the number of jobs from which a submit is sent as
// its file's digest (wire.SubmitDigestRequest) rather than as its jobs'
// ads.
const DigestSubmitMin = 1000

// digestSubmit returns the digest request of a submit of f of
// DigestSubmitMin jobs or more, nil for a smaller one. It builds every
// job here first, one at a time, so that a mistake in any of them is
// reported before anything is queued, and so that the digest holds all
// the files and directories of this host the jobs read.
func digestSubmit(ctx context.Context, f *submit.File, opts submit.Options, cluster int) (*wire.SubmitDigestRequest, error) {
	fa, err := f.NewFactory(ctx, opts)
	if err != nil {
		return nil, err
	}
	if fa.Total() < DigestSubmitMin {
		return nil, nil
	}
	for proc := range fa.Total() {
		if proc%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if _, err := fa.Job(opts.FirstProc + proc); err != nil {
			return nil, err
		}
	}
	digest, err := fa.Digest()
	if err != nil {
		return nil, err
	}
	return &wire.SubmitDigestRequest{Cluster: cluster, Digest: digest}, nil
}

// commitPolicy says how a submitter that lost a commit's answer asks
// again: Backoff are the waits before each repeat (the last one
// repeats), and Wait bounds the time spent asking after the first
// attempt failed.
type commitPolicy struct {
	Backoff []time.Duration
	Wait    time.Duration
}

// submitCommit is condor_submit's policy: a schedd whose agent is being
// restarted answers again within seconds, and one that stays silent for
// a minute is reported as such.
var submitCommit = commitPolicy{
	Backoff: []time.Duration{250 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second},
	Wait:    time.Minute,
}

// CommitError is a failed commit of a cluster's jobs, and what the
// submitter learnt of its outcome. Either the schedd refused the jobs
// and queued none of them (NotCommitted), so submitting again is safe,
// or the schedd did not answer before the submitter stopped asking, and
// the cluster may or may not hold the jobs.
type CommitError struct {
	// Cluster is the cluster the jobs were for.
	Cluster int
	// Addr is the address of the schedd's node.
	Addr string
	// NotCommitted is true when the schedd answered that it did not
	// queue the jobs; false means the outcome is unknown.
	NotCommitted bool
	// Attempts is the number of commits sent, Waited the time spent
	// asking after the first one failed.
	Attempts int
	Waited   time.Duration
	// Err is the last failure.
	Err error
}

func (e *CommitError) Error() string {
	if e.NotCommitted {
		return fmt.Sprintf("cluster %d not committed: the schedd at %s queued none of its jobs, so submitting again is safe: %v",
			e.Cluster, e.Addr, e.Err)
	}
	return fmt.Sprintf("committing cluster %d: outcome unknown: the schedd at %s did not answer (%d attempts over %s; last: %v); "+
		"the cluster may hold the jobs: before submitting again, run `pondctl condor q -pool %s -constraint 'ClusterId == %d'` "+
		"(and `pondctl condor history -pool %s -constraint 'ClusterId == %d'` for jobs that already left the queue)",
		e.Cluster, e.Addr, e.Attempts, e.Waited.Round(time.Second), e.Err, e.Addr, e.Cluster, e.Addr, e.Cluster)
}

func (e *CommitError) Unwrap() error { return e.Err }

// commit sends req to the schedd, and sends it again, after the waits
// of p, while the schedd gives no answer that settles the outcome (a
// success, or a refusal of the request) and p.Wait has not passed since
// the first failure. The commit is idempotent: the schedd answers a
// repeat of a committed submission as it answered the first.
func commit(ctx context.Context, sc *wire.Schedd, cluster int, send func(context.Context) (*wire.SubmitResponse, error), p commitPolicy) (*wire.SubmitResponse, error) {
	var start time.Time
	actx := ctx // the first attempt, then those before the deadline
	for attempt := 0; ; attempt++ {
		resp, err := send(actx)
		if err == nil {
			return resp, nil
		}
		if refused(err) {
			return nil, &CommitError{Cluster: cluster, Addr: sc.Addr(), NotCommitted: true, Attempts: attempt + 1,
				Waited: since(start), Err: err}
		}
		if attempt == 0 {
			start = time.Now()
			var cancel context.CancelFunc
			actx, cancel = context.WithTimeout(ctx, p.Wait)
			defer cancel()
		}
		if actx.Err() == nil {
			select {
			case <-actx.Done():
			case <-time.After(p.Backoff[min(attempt, len(p.Backoff)-1)]):
				continue
			}
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (after %w)", ctx.Err(), err)
		}
		return nil, &CommitError{Cluster: cluster, Addr: sc.Addr(), Attempts: attempt + 1, Waited: since(start), Err: err}
	}
}

func since(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return time.Since(t)
}

// refused reports whether err is the schedd's refusal of a request (a
// 4xx answer: a bad or unauthorized request, an unknown or conflicting
// cluster), which it gives before queueing anything. A lost answer (the
// connection refused, reset or closed, a timeout) and a server error,
// which may come after the commit, settle nothing.
func refused(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Status >= 400 && we.Status < 500 &&
		we.Status != http.StatusRequestTimeout && we.Status != http.StatusTooManyRequests
}

// status letters of condor_q's ST column, by JobStatus.
var stLetter = map[int64]string{1: "I", 2: "R", 3: "X", 4: "C", 5: "H", 6: ">", 7: "S"}

func intAttr(a *classad.Ad, n string) int64 {
	v := a.EvalAttr(n)
	if i, ok := v.IntValue(); ok {
		return i
	}
	if f, ok := v.NumberValue(); ok {
		return int64(f)
	}
	return 0
}

func strAttr(a *classad.Ad, n string) string {
	s, _ := a.EvalAttr(n).StringValue()
	return s
}

func runTime(a *classad.Ad, now time.Time) string {
	secs := int64(0)
	if f, ok := a.EvalAttr("RemoteWallClockTime").NumberValue(); ok {
		secs = int64(f)
	}
	if intAttr(a, "JobStatus") == 2 {
		if st := intAttr(a, "JobCurrentStartDate"); st > 0 {
			secs += now.Unix() - st
		}
	}
	return fmt.Sprintf("%d+%02d:%02d:%02d", secs/86400, secs/3600%24, secs/60%60, secs%60)
}

func cmdLine(a *classad.Ad) string {
	cmd := filepath.Base(strAttr(a, "Cmd"))
	argv, err := submit.Argv(wire.FromClassAd(a))
	if err == nil && len(argv) > 0 {
		cmd += " " + strings.Join(argv, " ")
	}
	return cmd
}

// Q is condor_q: the queue of the schedd on the -pool node (or -name), by
// batch by default, one line per job with -nobatch (-dag: a DAG's node
// jobs under its DAG manager's job), holds with -hold,
// running jobs with -run, only the totals with -totals, or
// -af/-format/-l/-json; positional arguments select clusters, jobs or
// owners, and -limit N keeps the first N jobs. Every user's jobs are
// shown, as with -allusers (HTCondor's CONDOR_Q_ONLY_MY_JOBS = false).
// The default view and the totals are counted by the schedd, without the
// jobs' ads; the others print each job as the schedd streams it, the
// one-line views asking only for the attributes they show.
func Q(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	c, err := parseArgs(args, specQ, env, true)
	if err != nil {
		return fail(stderr, "condor_q", err)
	}
	sc, name, err := scheddOf(ctx, c, env)
	if err != nil {
		return fail(stderr, "condor_q", err)
	}
	req := &wire.QueryJobsRequest{Args: c.rest, Constraint: c.constraint}
	limit := c.intFlag("limit", -1)
	if c.flags["analyze"] != "" || c.flags["better-analyze"] != "" {
		if err := analyzeJobs(ctx, sc, name, c, req, limit, env, stdout); err != nil {
			return fail(stderr, "condor_q", err)
		}
		return 0
	}
	if c.json || c.long || c.af != nil || c.formats != nil {
		if err := qAds(ctx, sc, req, c, limit, stdout); err != nil {
			return fail(stderr, "condor_q", err)
		}
		return 0
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	now := time.Now()
	header := func() {
		fmt.Fprintf(w, "\n\n-- Schedd: %s : <%s> @ %s\n", name, sc.Addr(), now.Format("01/02/06 15:04:05"))
	}
	tot := totals{}
	switch {
	case c.flags["hold"] != "":
		header()
		fmt.Fprintf(w, "%-9s %-14s %-11s %s\n", " ID", "OWNER", " HELD_SINCE", "HOLD_REASON")
		held := *req
		held.Status = []int{5}
		held.Projection = []string{"ClusterId", "ProcId", "Owner", "EnteredCurrentStatus", "HoldReason"}
		err := eachUpTo(ctx, sc, &held, limit, func(a *classad.Ad) error {
			fmt.Fprintf(w, "%6d.%-3d %-14s %-11s %s\n", intAttr(a, "ClusterId"), intAttr(a, "ProcId"), strAttr(a, "Owner"),
				time.Unix(intAttr(a, "EnteredCurrentStatus"), 0).Format("01/02 15:04"), strAttr(a, "HoldReason"))
			return flushSoon(w)
		})
		if err == nil {
			err = addSummary(ctx, sc, req, limit, tot)
		}
		if err != nil {
			w.Flush()
			return fail(stderr, "condor_q", err)
		}
	case c.flags["dag"] != "":
		header()
		if err := printDAGs(ctx, w, sc, req, limit, now, tot); err != nil {
			w.Flush()
			return fail(stderr, "condor_q", err)
		}
	case c.flags["nobatch"] != "" || c.flags["run"] != "":
		header()
		fmt.Fprintf(w, "%-9s %-14s %11s %12s %-2s %-3s %-4s %s\n", " ID", "OWNER", "SUBMITTED", "RUN_TIME", "ST", "PRI", "SIZE", "CMD")
		rows := *req
		rows.Projection = []string{"ClusterId", "ProcId", "Owner", "QDate", "RemoteWallClockTime", "JobStatus", "JobCurrentStartDate",
			"JobPrio", "ImageSize", "Cmd", "Arguments", "Args"}
		run := c.flags["run"] != ""
		if run {
			rows.Status = []int{2}
		}
		err := eachUpTo(ctx, sc, &rows, limit, func(a *classad.Ad) error {
			fmt.Fprintf(w, "%6d.%-3d %-14s %11s %12s %-2s %-3d %-4.1f %s\n", intAttr(a, "ClusterId"), intAttr(a, "ProcId"),
				strAttr(a, "Owner"), time.Unix(intAttr(a, "QDate"), 0).Format("01/02 15:04"), runTime(a, now),
				stLetter[intAttr(a, "JobStatus")], intAttr(a, "JobPrio"), float64(intAttr(a, "ImageSize"))/1024, cmdLine(a))
			if !run {
				tot.add(strAttr(a, "Owner"), int(intAttr(a, "JobStatus")), 1)
			}
			return flushSoon(w)
		})
		if err == nil && run {
			// The totals are the query's, as without -run.
			err = addSummary(ctx, sc, req, limit, tot)
		}
		if err != nil {
			w.Flush()
			return fail(stderr, "condor_q", err)
		}
	default:
		groups, facs, err := queueGroups(ctx, sc, req, limit)
		if err != nil {
			return fail(stderr, "condor_q", err)
		}
		header()
		if c.flags["totals"] == "" {
			printBatches(w, groups, facs)
		}
		tot.addGroups(groups)
		tot.addFactories(facs)
	}
	tot.print(w)
	return 0
}

// errEnough ends a streamed query once -limit jobs have come.
var errEnough = errors.New("enough jobs")

// eachUpTo calls fn with each job req selects, as the schedd streams
// them, and stops after limit jobs (limit < 0: every job).
func eachUpTo(ctx context.Context, sc *wire.Schedd, req *wire.QueryJobsRequest, limit int, fn func(*classad.Ad) error) error {
	if limit == 0 {
		return nil
	}
	n := 0
	err := sc.QueueEach(ctx, req, func(j wire.Job) error {
		a, err := wire.ToClassAd(j.Ad)
		if err != nil {
			return fmt.Errorf("job %s: %w", j.ID, err)
		}
		if err := fn(a); err != nil {
			return err
		}
		if n++; limit > 0 && n >= limit {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		return nil
	}
	return err
}

// qAds prints the jobs a query selects in -json, -l, -af or -format form.
// Without -limit, -attributes, -af or -format, -json and -l print each
// job as the schedd streams it; the other forms take the jobs first.
func qAds(ctx context.Context, sc *wire.Schedd, req *wire.QueryJobsRequest, c *common, limit int, stdout io.Writer) error {
	if (c.json || c.long) && c.af == nil && c.attributes == nil && c.formats == nil && limit < 0 {
		return streamAds(ctx, sc, req, c, stdout)
	}
	var list []*classad.Ad
	if err := eachUpTo(ctx, sc, req, limit, func(a *classad.Ad) error {
		list = append(list, a)
		return nil
	}); err != nil {
		return err
	}
	_, err := printAds(stdout, c, list)
	return err
}

// addSummary adds the counts of the jobs req selects to tot (the first
// limit jobs' when limit >= 0).
func addSummary(ctx context.Context, sc *wire.Schedd, req *wire.QueryJobsRequest, limit int, tot totals) error {
	groups, _, err := queueGroups(ctx, sc, req, limit)
	if err != nil {
		return err
	}
	tot.addGroups(groups)
	return nil
}

// queueGroups returns the counts of the jobs req selects: the schedd's,
// or, with a limit (limit >= 0), those of the first limit jobs, counted
// here.
func queueGroups(ctx context.Context, sc *wire.Schedd, req *wire.QueryJobsRequest, limit int) ([]wire.QueueGroup, []wire.QueueFactory, error) {
	if limit < 0 {
		return summary(ctx, sc, req)
	}
	g, err := countJobs(ctx, sc, req, limit)
	return g, nil, err
}

// summary returns the schedd's counts of the jobs a query selects; a
// schedd of an earlier version, without them (HTTP 404), sends the jobs'
// states instead, counted here.
func summary(ctx context.Context, sc *wire.Schedd, req *wire.QueryJobsRequest) ([]wire.QueueGroup, []wire.QueueFactory, error) {
	sum, err := sc.QueueSummary(ctx, req)
	var we *wire.Error
	if !errors.As(err, &we) || we.Status != http.StatusNotFound {
		if err != nil {
			return nil, nil, err
		}
		return sum.Groups, sum.Factories, nil
	}
	g, err := countJobs(ctx, sc, req, -1)
	return g, nil, err
}

// countJobs counts the jobs req selects (the first limit of them when
// limit >= 0) as summary's groups, from their states.
func countJobs(ctx context.Context, sc *wire.Schedd, req *wire.QueryJobsRequest, limit int) ([]wire.QueueGroup, error) {
	var groups []wire.QueueGroup
	index := map[wire.QueueGroup]int{} // by cluster, owner, batch and state
	jobs := *req
	jobs.Projection = []string{"ClusterId", "ProcId", "Owner", "JobStatus", "QDate", "JobBatchName"}
	err := eachUpTo(ctx, sc, &jobs, limit, func(a *classad.Ad) error {
		proc := int(intAttr(a, "ProcId"))
		k := wire.QueueGroup{Cluster: int(intAttr(a, "ClusterId")), Owner: strAttr(a, "Owner"), BatchName: strAttr(a, "JobBatchName"),
			Status: int(intAttr(a, "JobStatus"))}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			g := k
			g.FirstProc, g.LastProc, g.QDate = proc, proc, intAttr(a, "QDate")
			groups = append(groups, g)
		}
		g := &groups[i]
		g.Jobs++
		g.FirstProc, g.LastProc = min(g.FirstProc, proc), max(g.LastProc, proc)
		return nil
	})
	return groups, err
}

// flushSoon writes out w's buffer when it holds a screenful, so that rows
// appear as they arrive without a write per row.
func flushSoon(w *bufio.Writer) error {
	if w.Buffered() >= 4096 {
		return w.Flush()
	}
	return nil
}

// streamAds prints the jobs a query selects in -json, -l or -af form as
// the schedd streams them.
func streamAds(ctx context.Context, sc *wire.Schedd, req *wire.QueryJobsRequest, c *common, stdout io.Writer) error {
	var progs []classad.Expr
	if c.af != nil && !c.json && !c.long {
		progs = make([]classad.Expr, len(c.af))
		for i, n := range c.af {
			e, err := classad.ParseExpr(n)
			if err != nil {
				return fmt.Errorf("-af %s: %w", n, err)
			}
			progs[i] = e
		}
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	n := 0
	err := sc.QueueEach(ctx, req, func(j wire.Job) error {
		a, err := wire.ToClassAd(j.Ad)
		if err != nil {
			return fmt.Errorf("job %s: %w", j.ID, err)
		}
		if c.af != nil && (c.json || c.long) {
			a = projectAds([]*classad.Ad{a}, c.af)[0]
		}
		switch {
		case c.json:
			// The form of classad.MarshalJSON's array, an ad at a time.
			b := classad.MarshalJSON([]*classad.Ad{a})
			b = bytes.TrimSuffix(bytes.TrimPrefix(b, []byte("[\n")), []byte("\n]\n"))
			if n == 0 {
				w.WriteString("[\n")
			} else {
				w.WriteString(",\n")
			}
			w.Write(b)
		case c.long:
			text := a.String()
			w.WriteString(text)
			if !strings.HasSuffix(text, "\n") {
				w.WriteByte('\n')
			}
			w.WriteByte('\n')
		default:
			vals := make([]string, len(progs))
			for i, e := range progs {
				v := a.EvalExpr(e)
				if s, ok := v.StringValue(); ok {
					vals[i] = s
				} else {
					vals[i] = v.String()
				}
			}
			w.WriteString(strings.Join(vals, " "))
			w.WriteByte('\n')
		}
		n++
		return flushSoon(w)
	})
	if c.json && (err == nil || n > 0) {
		if n == 0 {
			w.WriteString("[\n")
		}
		w.WriteString("\n]\n\n") // as printAds prints classad.MarshalJSON's array
	}
	return err
}

// printBatches prints condor q's default view from the schedd's counts:
// one line per owner and batch (JobBatchName, else the cluster), in the
// order of their first cluster.
//
// A cluster with a job factory (late materialization) counts as
// HTCondor's condor_q counts it: TOTAL is the jobs its factory makes in
// all (TotalSubmitProcs), DONE includes those that left the queue.
func printBatches(w io.Writer, groups []wire.QueueGroup, facs []wire.QueueFactory) {
	present := map[int]int{}
	for _, g := range groups {
		present[g.Cluster] += g.Jobs
	}
	fac := map[int]wire.QueueFactory{}
	for _, f := range facs {
		fac[f.Cluster] = f
	}
	counted := map[int]bool{}
	type batch struct {
		owner, name                string
		qdate                      int64
		done, run, idle, held, tot int
		first, last                jobqueue.JobID
	}
	var order []string
	batches := map[string]*batch{}
	for _, g := range groups {
		name := g.BatchName
		if name == "" {
			name = fmt.Sprintf("ID: %d", g.Cluster)
		}
		key := g.Owner + "\x00" + name
		first := jobqueue.JobID{Cluster: g.Cluster, Proc: g.FirstProc}
		last := jobqueue.JobID{Cluster: g.Cluster, Proc: g.LastProc}
		b := batches[key]
		if b == nil {
			b = &batch{owner: g.Owner, name: name, qdate: g.QDate, first: first, last: last}
			batches[key] = b
			order = append(order, key)
		}
		if idLess(first, b.first) {
			b.first, b.qdate = first, g.QDate
		}
		if idLess(b.last, last) {
			b.last = last
		}
		b.tot += g.Jobs
		if f, ok := fac[g.Cluster]; ok && !counted[g.Cluster] {
			counted[g.Cluster] = true
			b.tot += f.Total - f.Next                   // not yet made
			b.done += max(0, f.Next-present[g.Cluster]) // made and gone
			b.tot += max(0, f.Next-present[g.Cluster])
		}
		switch g.Status {
		case 1:
			b.idle += g.Jobs
		case 2:
			b.run += g.Jobs
		case 4:
			b.done += g.Jobs
		case 5:
			b.held += g.Jobs
		}
	}
	fmt.Fprintf(w, "%-5s %-13s %-11s %6s %6s %6s %6s %s\n", "OWNER", "BATCH_NAME", "SUBMITTED", "DONE", "RUN", "IDLE", "TOTAL", "JOB_IDS")
	dash := func(n int) string {
		if n == 0 {
			return "_"
		}
		return strconv.Itoa(n)
	}
	for _, k := range order {
		b := batches[k]
		ids := b.first.String()
		if b.last != b.first {
			ids += "-" + strconv.Itoa(b.last.Proc)
		}
		held := ""
		if b.held > 0 {
			held = fmt.Sprintf("%6s ", dash(b.held))
		}
		fmt.Fprintf(w, "%-5s %-13s %-11s %6s %6s %6s %s%6d %s\n", b.owner, b.name, time.Unix(b.qdate, 0).Format("01/02 15:04"),
			dash(b.done), dash(b.run), dash(b.idle), held, b.tot, ids)
	}
}

func idLess(a, b jobqueue.JobID) bool {
	if a.Cluster != b.Cluster {
		return a.Cluster < b.Cluster
	}
	return a.Proc < b.Proc
}

// tally counts jobs by state, as condor q's totals show them.
type tally struct {
	all, completed, removed, idle, running, held, suspended int
	// unmaterialized are the jobs job factories have yet to make.
	unmaterialized, factories int
}

func (t *tally) add(status, n int) {
	t.all += n
	switch status {
	case 1:
		t.idle += n
	case 2:
		t.running += n
	case 3:
		t.removed += n
	case 4:
		t.completed += n
	case 5:
		t.held += n
	case 7:
		t.suspended += n
	}
}

// totals counts the jobs of a query by owner.
type totals map[string]*tally

func (t totals) add(owner string, status, n int) {
	if t[owner] == nil {
		t[owner] = &tally{}
	}
	t[owner].add(status, n)
}

func (t totals) addGroups(groups []wire.QueueGroup) {
	for _, g := range groups {
		t.add(g.Owner, g.Status, g.Jobs)
	}
}

// addFactories counts the jobs job factories have yet to make.
func (t totals) addFactories(facs []wire.QueueFactory) {
	for _, f := range facs {
		if t[f.Owner] == nil {
			t[f.Owner] = &tally{}
		}
		t[f.Owner].unmaterialized += f.Total - f.Next
		t[f.Owner].factories++
	}
}

// print prints condor q's totals: the query's, each owner's, all users'.
func (t totals) print(w io.Writer) {
	line := func(label string, c tally) {
		fmt.Fprintf(w, "Total for %s: %d jobs; %d completed, %d removed, %d idle, %d running, %d held, %d suspended\n",
			label, c.all, c.completed, c.removed, c.idle, c.running, c.held, c.suspended)
		if c.factories > 0 {
			fmt.Fprintf(w, "  and %d jobs not yet materialized by %d job factories (max_materialize, max_idle)\n", c.unmaterialized, c.factories)
		}
	}
	fmt.Fprintln(w)
	var all tally
	names := make([]string, 0, len(t))
	for o, c := range t {
		names = append(names, o)
		all.all += c.all
		all.completed += c.completed
		all.removed += c.removed
		all.idle += c.idle
		all.running += c.running
		all.held += c.held
		all.suspended += c.suspended
		all.unmaterialized += c.unmaterialized
		all.factories += c.factories
	}
	sort.Strings(names)
	line("query", all)
	for _, o := range names {
		line(o, *t[o])
	}
	line("all users", all)
	fmt.Fprintln(w)
}

// History is condor_history: finished jobs, most recent first; -limit N
// (or -match N) bounds them.
func History(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	c, err := parseArgs(args, specHistory, env, true)
	if err != nil {
		return fail(stderr, "condor_history", err)
	}
	limit := c.intFlag("match", c.intFlag("limit", 0))
	sc, _, err := scheddOf(ctx, c, env)
	if err != nil {
		return fail(stderr, "condor_history", err)
	}
	jobs, err := sc.History(ctx, &wire.QueryJobsRequest{Args: c.rest, Constraint: c.constraint, Limit: limit})
	if err != nil {
		return fail(stderr, "condor_history", err)
	}
	list := make([]*classad.Ad, 0, len(jobs))
	for _, j := range jobs {
		a, err := wire.ToClassAd(j.Ad)
		if err != nil {
			return fail(stderr, "condor_history", err)
		}
		list = append(list, a)
	}
	if done, err := printAds(stdout, c, list); done {
		if err != nil {
			return fail(stderr, "condor_history", err)
		}
		return 0
	}
	fmt.Fprintf(stdout, "%-9s %-14s %11s %12s %-2s %11s %s\n", " ID", "OWNER", "SUBMITTED", "RUN_TIME", "ST", "COMPLETED", "CMD")
	for _, a := range list {
		completed := "???"
		if cd := intAttr(a, "CompletionDate"); cd > 0 {
			completed = time.Unix(cd, 0).Format("01/02 15:04")
		}
		fmt.Fprintf(stdout, "%6d.%-3d %-14s %11s %12s %-2s %11s %s\n", intAttr(a, "ClusterId"), intAttr(a, "ProcId"), strAttr(a, "Owner"),
			time.Unix(intAttr(a, "QDate"), 0).Format("01/02 15:04"), runTime(a, time.Now()), stLetter[intAttr(a, "JobStatus")],
			completed, cmdLine(a))
	}
	return 0
}

// jobIDPattern is a job's id, cluster.proc.
var jobIDPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

// act runs condor_rm, condor_hold and condor_release.
func act(ctx context.Context, tool, action string, args []string, stdout, stderr io.Writer, env []string) int {
	c, err := parseArgs(args, specAct, env, true)
	if err != nil {
		return fail(stderr, tool, err)
	}
	all := c.flags["all"] != ""
	if len(c.rest) == 0 && c.constraint == "" && !all {
		fmt.Fprintf(stderr, "Usage: %s [options] { cluster | cluster.proc | user | -constraint expr | -all } ...\n", tool)
		return 1
	}
	sc, _, err := scheddOf(ctx, c, env)
	if err != nil {
		return fail(stderr, tool, err)
	}
	verb := map[string]string{wire.ActRemove: "marked for removal", wire.ActHold: "held", wire.ActRelease: "released"}[action]
	status := 0
	// As HTCondor's tools: a line for each job named by its id, one
	// line for a cluster, a user, a constraint or all jobs.
	run := func(sel []string, describe string) {
		resp, err := sc.Act(ctx, &wire.ActRequest{Action: action, Args: sel, Constraint: c.constraint, All: all,
			Reason: c.flags["reason"]})
		if err != nil {
			fail(stderr, tool, err)
			status = 1
			return
		}
		if resp.Count == 0 && len(resp.Changed) == 0 {
			what := strings.TrimSpace(describe)
			if what == "" && len(sel) == 1 {
				what = sel[0]
			}
			if len(sel) == 1 && jobIDPattern.MatchString(what) {
				// One job by its id, as HTCondor's tools say it.
				fmt.Fprintf(stderr, "Job %s not found\n", what)
			} else {
				fmt.Fprintf(stderr, "Couldn't find/%s all jobs %s\n", action, what)
			}
			status = 1
			return
		}
		switch describe {
		case "":
			for _, id := range resp.Changed {
				fmt.Fprintf(stdout, "Job %s %s\n", id, verb)
			}
		case "all":
			fmt.Fprintf(stdout, "All jobs %s.\n", verb)
		default:
			fmt.Fprintf(stdout, "All jobs %s have been %s\n", describe, verb)
		}
	}
	if len(c.rest) == 0 {
		switch {
		case all:
			run(nil, "all")
		default:
			run(nil, "matching constraint ("+c.constraint+")")
		}
		return status
	}
	for _, a := range c.rest {
		switch {
		case strings.Contains(a, "."):
			run([]string{a}, "")
		case isNumber(a):
			run([]string{a}, "in cluster "+a)
		default:
			run([]string{a}, "of user "+a)
		}
	}
	return status
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// Rm is condor_rm.
func Rm(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	return act(ctx, "condor_rm", wire.ActRemove, args, stdout, stderr, env)
}

// Hold is condor_hold (-reason TEXT sets the hold reason).
func Hold(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	return act(ctx, "condor_hold", wire.ActHold, args, stdout, stderr, env)
}

// Release is condor_release.
func Release(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	return act(ctx, "condor_release", wire.ActRelease, args, stdout, stderr, env)
}

// ConfigVal is condor_config_val against the local configuration
// (CONDOR_CONFIG, else /etc/condor/condor_config when it exists, else the
// defaults).
func ConfigVal(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	path := config.ConfigPath(func(n string) (string, bool) { v := getenv(env, n); return v, v != "" })
	var cfg *config.Config
	if _, err := os.Stat(path); err == nil {
		if cfg, err = config.Load(path); err != nil {
			return fail(stderr, "condor_config_val", err)
		}
	} else {
		cfg = config.New(config.Options{})
	}
	return config.ConfigVal(cfg, args, stdout, stderr)
}

// Reconfig is condor_reconfig: the -pool node's master re-reads its
// configuration and applies it.
func Reconfig(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	c, err := parseArgs(args, specReconfig, env, true)
	if err != nil {
		return fail(stderr, "condor_reconfig", err)
	}
	node, err := client(c.pool, env)
	if err != nil {
		return fail(stderr, "condor_reconfig", err)
	}
	info, err := node.Master().Reconfig(ctx)
	if err != nil {
		return fail(stderr, "condor_reconfig", err)
	}
	fmt.Fprintf(stdout, "Sent \"Reconfig\" command to master %s\n", info.Name)
	return 0
}
