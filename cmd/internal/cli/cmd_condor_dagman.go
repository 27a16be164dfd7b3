package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/dagman"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
)

// condorDagman is "pondctl condor dagman run [options] FILE.dag": pond's
// DAG manager (HTCondor's DAGMan) running a DAG in the foreground. It
// submits the nodes' jobs through condor submit to the pool -pool (or
// POND_POOL_ADDR, or the HTCondor configuration) names, follows their
// event log FILE.dag.nodes.log, writes FILE.dag.dagman.out and, when the
// DAG fails, a rescue DAG FILE.dag.rescueNNN that the next run uses.
func (m *meta) condorDagman(ctx context.Context, args []string) int {
	const usage = "Usage: pondctl condor dagman run [-pool ADDR] [-name SCHEDD] [-maxjobs N] [-maxidle N] [-maxpre N] [-maxpost N] [-batch-name NAME] [-norescue] FILE.dag"
	if len(args) == 0 || args[0] != "run" {
		if len(args) > 0 && isHelp(args[0]) {
			fmt.Fprintln(m.stdout, usage)
			return 0
		}
		fmt.Fprintln(m.stderr, usage)
		return 1
	}
	fs := flag.NewFlagSet("dagman", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pool := fs.String("pool", "", "")
	name := fs.String("name", "", "")
	maxJobs := fs.Int("maxjobs", 0, "")
	maxIdle := fs.Int("maxidle", 0, "")
	maxPre := fs.Int("maxpre", 0, "")
	maxPost := fs.Int("maxpost", 0, "")
	dagmanJob := fs.Int("dagman-job-id", 0, "")
	noRescue := fs.Bool("norescue", false, "")
	batch := fs.String("batch-name", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(m.stdout, usage)
			return 0
		}
		fmt.Fprintf(m.stderr, "condor_dagman: ERROR: %v\n%s\n", err, usage)
		return 1
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(m.stderr, "condor_dagman: ERROR: give one DAG file\n%s\n", usage)
		return 1
	}
	for _, v := range []int{*maxJobs, *maxIdle, *maxPre, *maxPost} {
		if v < 0 {
			fmt.Fprintf(m.stderr, "condor_dagman: ERROR: a throttle is negative\n")
			return 1
		}
	}
	dag := fs.Arg(0)
	if !filepath.IsAbs(dag) {
		dag = filepath.Join(m.dir, dag)
	}
	var common []string
	if *pool != "" {
		common = append(common, "-pool", *pool)
	}
	if *name != "" {
		common = append(common, "-name", *name)
	}
	env := slices.Clone(m.env)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// SIGUSR1 is the DAG job's RemoveKillSig (condor rm of the job
	// submit_dag queued): the nodes' jobs go too, and a rescue DAG is
	// written. SIGTERM stops the DAG manager, to recover when run again.
	removed := make(chan os.Signal, 1)
	signal.Notify(removed, syscall.SIGUSR1)
	defer signal.Stop(removed)
	removedC := make(chan struct{})
	go func() {
		select {
		case <-removed:
			close(removedC)
		case <-ctx.Done():
		}
	}()
	// The pool's client reads its CA and token from the working
	// directory, as condor submit does.
	batcher, err := tools.NewBatcher(common, append(slices.Clone(env), "PWD="+m.dir))
	if err != nil {
		fmt.Fprintf(m.stderr, "condor_dagman: ERROR: %v\n", err)
		return 1
	}
	opts := dagman.Options{
		SubmitBatch: func(ctx context.Context, reqs []dagman.SubmitRequest) []dagman.SubmitResult {
			return submitNodes(ctx, batcher, reqs, *pool, *name, *batch, m.stderr)
		},
		Queued: func(ctx context.Context, nodesLog string, history []int) ([]dagman.QueuedNode, error) {
			return queuedNodes(ctx, batcher, nodesLog, history)
		},
		MaxJobs: *maxJobs, MaxIdle: *maxIdle, MaxPre: *maxPre, MaxPost: *maxPost, DAGManJobID: *dagmanJob,
		Env: env, Out: m.stdout, NoRescue: *noRescue, Removed: removedC, BatchName: *batch,
		Submit: func(ctx context.Context, req dagman.SubmitRequest) (dagman.Submitted, error) {
			if req.SubDAG {
				sub, err := writeSubDAG(req, *pool, *name, *batch)
				if err != nil {
					return dagman.Submitted{}, err
				}
				req.SubmitFile, req.Macros = sub, nil
			}
			return submitNode(ctx, req, common, env)
		},
		Remove: func(ctx context.Context, cluster int) error {
			var out bytes.Buffer
			args := append(slices.Clone(common), strconv.Itoa(cluster))
			if tools.Rm(ctx, args, io.Discard, &out, env) != 0 {
				return errors.New(strings.TrimSpace(out.String()))
			}
			return nil
		},
	}
	code, err := dagman.Run(ctx, dag, opts)
	if err != nil {
		fmt.Fprintf(m.stderr, "condor_dagman: ERROR: %v\n", err)
		return max(code, 1)
	}
	return code
}

// submitNode submits a node's jobs as condor_submit would, with the
// node's macros and lines, and returns the cluster and its job count.
func submitNode(ctx context.Context, req dagman.SubmitRequest, common, env []string) (dagman.Submitted, error) {
	args := append(slices.Clone(common), "-terse")
	for _, l := range req.Lines {
		args = append(args, "-append", l)
	}
	keys := make([]string, 0, len(req.Macros))
	for k := range req.Macros {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, k+"="+req.Macros[k])
	}
	args = append(args, req.SubmitFile)
	var out, errb bytes.Buffer
	if tools.SubmitInput(ctx, args, nil, &out, &errb, append(slices.Clone(env), "PWD="+req.Dir)) != 0 {
		return dagman.Submitted{}, errors.New(strings.TrimSpace(errb.String()))
	}
	// -terse prints "C.0 - C.N".
	var c, p0, c2, pn int
	if _, err := fmt.Sscanf(strings.TrimSpace(out.String()), "%d.%d - %d.%d", &c, &p0, &c2, &pn); err != nil {
		if strings.TrimSpace(out.String()) == "" {
			return dagman.Submitted{}, nil
		}
		return dagman.Submitted{}, fmt.Errorf("unexpected condor_submit output %q", out.String())
	}
	return dagman.Submitted{Cluster: c, Jobs: pn + 1}, nil
}

// submitNodes submits the jobs of nodes reqs at once, a cluster each, in
// one transaction of the schedd (see tools.Batcher).
func submitNodes(ctx context.Context, b *tools.Batcher, reqs []dagman.SubmitRequest, pool, name, batch string, stderr io.Writer) []dagman.SubmitResult {
	res := make([]dagman.SubmitResult, len(reqs))
	var specs []tools.BatchSpec
	var at []int
	for i, req := range reqs {
		if req.SubDAG {
			sub, err := writeSubDAG(req, pool, name, batch)
			if err != nil {
				res[i].Err = err
				continue
			}
			req.SubmitFile, req.Macros = sub, nil
		}
		specs = append(specs, tools.BatchSpec{SubmitFile: req.SubmitFile, Dir: req.Dir, Macros: req.Macros, Lines: req.Lines})
		at = append(at, i)
	}
	for k, r := range b.Submit(ctx, specs, stderr) {
		i := at[k]
		res[i].Err = r.Err
		if r.Err == nil && r.Resp != nil {
			res[i].Submitted = dagman.Submitted{Cluster: r.Resp.Cluster, Jobs: r.Resp.Jobs}
		}
	}
	return res
}

// maxRecoveredHistory bounds the finished jobs recovery reads back.
const maxRecoveredHistory = 100000

// queuedNodes is the clusters of the DAG of the nodes' log nodesLog in
// the schedd's queue and, among history, in its history, by node.
func queuedNodes(ctx context.Context, b *tools.Batcher, nodesLog string, history []int) ([]dagman.QueuedNode, error) {
	con := "DAGManNodesLog == " + strconv.Quote(nodesLog)
	want := map[int]bool{}
	for _, c := range history {
		want[c] = true
	}
	queue, hist, err := b.Jobs(ctx, con, []string{"ClusterId", "ProcId", "DAGNodeName"}, len(history) > 0, maxRecoveredHistory)
	if err != nil {
		return nil, err
	}
	type found struct {
		node  string
		procs map[string]bool
	}
	byCluster := map[int]*found{}
	var order []int
	add := func(j wire.Job, inQueue bool) {
		cs, _, _ := strings.Cut(j.ID, ".")
		c, err := strconv.Atoi(cs)
		if err != nil {
			return
		}
		node, err := classad.UnquoteString(j.Ad["DAGNodeName"])
		if err != nil || node == "" {
			return
		}
		f := byCluster[c]
		if f == nil {
			if !inQueue && !want[c] {
				return
			}
			f = &found{node: node, procs: map[string]bool{}}
			byCluster[c] = f
			order = append(order, c)
		}
		f.procs[j.ID] = true
	}
	for _, j := range queue {
		add(j, true)
	}
	for _, j := range hist {
		add(j, false)
	}
	res := make([]dagman.QueuedNode, 0, len(order))
	for _, c := range order {
		res = append(res, dagman.QueuedNode{Node: byCluster[c].node, Cluster: c, Jobs: len(byCluster[c].procs)})
	}
	return res, nil
}

// writeSubDAG writes the submit description of a SUBDAG EXTERNAL node's
// DAG job (FILE.dag.condor.sub beside the nested DAG, replaced at each
// submission, as condor_submit_dag -update_submit does), in the parent's
// pool and batch, and returns its path. The nested DAG is checked first,
// so that a mistake in it fails the submission with its file:line.
func writeSubDAG(req dagman.SubmitRequest, pool, name, batch string) (string, error) {
	if _, err := dagman.ParseFile(req.SubmitFile); err != nil {
		return "", err
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding pondctl: %w", err)
	}
	sub := req.SubmitFile + ".condor.sub"
	text := dagSubmitDescription(exe, req.SubmitFile, dagJobOptions{pool: pool, name: name, batch: batch})
	if err := os.WriteFile(sub, []byte(text), 0o644); err != nil {
		return "", err
	}
	return sub, nil
}
