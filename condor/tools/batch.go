package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// BatchSpec is one cluster of a Batcher's submission, as condor_submit
// FILE NAME=value... -append LINE... run in Dir would submit it.
type BatchSpec struct {
	// SubmitFile is the submit description's path (relative to Dir).
	SubmitFile string
	// Dir is the submitter's working directory.
	Dir string
	// Macros are defined before the file is read; Lines go just before
	// its queue statement.
	Macros map[string]string
	Lines  []string
}

// BatchResult is what the submission of one BatchSpec queued: the
// schedd's answer, or the reason it queued nothing (or, for a commit
// whose answer was lost, a *CommitError saying the outcome is unknown).
type BatchResult struct {
	Resp *wire.SubmitResponse
	Err  error
}

// Batcher submits many clusters at once (a DAG manager's ready nodes):
// the clusters of one Submit are reserved in one request and committed
// in one transaction of the schedd, all of them or none. Each distinct
// submit file is read and parsed once while it is unchanged (same size
// and modification time). A Batcher is safe for one caller at a time.
type Batcher struct {
	c   *common
	env []string
	mu  sync.Mutex
	// files are the submit files read, by path.
	files map[string]*cachedFile
	// owned is the Owner the schedd gives this submitter's jobs, once
	// known (see owner).
	owned string
}

// cachedFile is a submit file's text as read at its size and mtime.
type cachedFile struct {
	size  int64
	mtime time.Time
	text  []byte
	f     *submit.File
}

// maxCachedFiles bounds the submit files a Batcher keeps.
const maxCachedFiles = 4096

// NewBatcher returns a Batcher submitting to the schedd condor_submit's
// -pool ADDR and -name NAME in args (or the environment env) name.
func NewBatcher(args []string, env []string) (*Batcher, error) {
	c, err := parseArgs(args, specSubmit, env, true)
	if err != nil {
		return nil, err
	}
	if len(c.rest) > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", c.rest)
	}
	return &Batcher{c: c, env: env, files: map[string]*cachedFile{}}, nil
}

// file returns the parsed submit file at path, read again only when its
// size or modification time changed.
func (b *Batcher) file(path string) (*cachedFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	cf := b.files[path]
	b.mu.Unlock()
	if cf != nil && cf.size == st.Size() && cf.mtime.Equal(st.ModTime()) {
		return cf, nil
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := submit.Parse(path, text)
	if err != nil {
		return nil, err
	}
	cf = &cachedFile{size: st.Size(), mtime: st.ModTime(), text: text, f: f}
	b.mu.Lock()
	if len(b.files) >= maxCachedFiles {
		clear(b.files)
	}
	b.files[path] = cf
	b.mu.Unlock()
	return cf, nil
}

// parse is the submit file of spec with its lines, as condor_submit
// -append would read it.
func (b *Batcher) parse(spec BatchSpec) (*submit.File, string, error) {
	path := spec.SubmitFile
	if !filepath.IsAbs(path) {
		path = filepath.Join(spec.Dir, path)
	}
	cf, err := b.file(path)
	if err != nil {
		return nil, path, err
	}
	if len(spec.Lines) == 0 {
		return cf.f, path, nil
	}
	f, err := withCommandLine(cf.f, path, cf.text, &common{flags: map[string]string{}, multi: map[string][]string{"append": spec.Lines}})
	return f, path, err
}

// Submit submits the clusters of specs (at most wire.MaxSubmitBatch),
// one for each, and returns their results in order: a spec whose file
// is wrong fails alone, before anything is queued (its reserved cluster
// stays empty); the others are committed in one transaction, so they
// succeed together, or fail together with the same error. A submit file
// with late materialization (max_materialize, max_idle) is submitted on
// its own, as condor_submit would. Warnings of the files go to stderr.
func (b *Batcher) Submit(ctx context.Context, specs []BatchSpec, stderr io.Writer) []BatchResult {
	res := make([]BatchResult, len(specs))
	if len(specs) == 0 {
		return res
	}
	if len(specs) > wire.MaxSubmitBatch {
		for i := range res {
			res[i].Err = fmt.Errorf("a batch of %d clusters: at most %d at once", len(specs), wire.MaxSubmitBatch)
		}
		return res
	}
	setAll := func(err error) []BatchResult {
		for i := range res {
			if res[i].Err == nil && res[i].Resp == nil {
				res[i].Err = err
			}
		}
		return res
	}
	sc, _, err := scheddOf(ctx, b.c, b.env)
	if err != nil {
		return setAll(err)
	}
	type item struct {
		i    int
		f    *submit.File
		opts submit.Options
	}
	var items []item
	for i, spec := range specs {
		f, path, err := b.parse(spec)
		if err != nil {
			res[i].Err = err
			continue
		}
		for _, w := range f.Warnings() {
			fmt.Fprintln(stderr, w.String())
		}
		env := append(append([]string(nil), b.env...), "PWD="+spec.Dir)
		opts := submit.Options{Owner: currentUser(env), SubmitDir: spec.Dir, Env: env, Macros: spec.Macros,
			LookupEnv: func(n string) (string, bool) { return lookupEnv(env, n) }, CheckExecutable: submit.CheckExecutable, CheckLog: submit.CheckLog}
		maxMat, maxIdle, err := f.MaterializeLimits()
		if err != nil {
			res[i].Err = fmt.Errorf("%s: %w", path, err)
			continue
		}
		if maxMat > 0 || maxIdle > 0 {
			res[i].Resp, res[i].Err = SubmitFile(ctx, sc, f, opts)
			continue
		}
		items = append(items, item{i: i, f: f, opts: opts})
	}
	if len(items) == 0 {
		return res
	}
	nc, err := sc.NewClusters(ctx, len(items))
	if err != nil {
		return setAll(fmt.Errorf("reserving %d clusters: %w", len(items), err))
	}
	b.noteOwner(nc.Owner)
	req := &wire.SubmitBatchRequest{}
	var in []item
	for k, it := range items {
		opts := it.opts
		opts.ClusterID, opts.FirstProc, opts.ScheddName = nc.Clusters[k], 0, nc.ScheddName
		opts.Owner = firstNonEmpty(nc.Owner, opts.Owner)
		opts.UIDDomain = firstNonEmpty(nc.UIDDomain, opts.UIDDomain)
		opts.FileSystemDomain = firstNonEmpty(nc.FileSystemDomain, opts.FileSystemDomain)
		jobs, err := it.f.Jobs(ctx, opts)
		if err != nil {
			res[it.i].Err = err
			continue
		}
		req.Clusters = append(req.Clusters, wire.SubmitRequest{Cluster: nc.Clusters[k], Jobs: jobs})
		in = append(in, it)
	}
	if len(in) == 0 {
		return res
	}
	var out *wire.SubmitBatchResponse
	send := func(ctx context.Context) (*wire.SubmitResponse, error) {
		var err error
		out, err = sc.SubmitBatch(ctx, req)
		return nil, err
	}
	if _, err := commit(ctx, sc, req.Clusters[0].Cluster, send, submitCommit); err != nil {
		var ce *CommitError
		if errors.As(err, &ce) {
			// Each cluster of the batch shares its outcome.
			for k, it := range in {
				e := *ce
				e.Cluster = req.Clusters[k].Cluster
				res[it.i] = BatchResult{Resp: &wire.SubmitResponse{Cluster: e.Cluster}, Err: &e}
			}
			return res
		}
		return setAll(err)
	}
	for k, it := range in {
		r := out.Clusters[k]
		res[it.i].Resp = &r
	}
	return res
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Jobs returns the caller's own jobs of the schedd's queue that
// constraint selects, with the attributes of proj, and, with history,
// those of its history (at most limit of them). Another user's jobs are
// left out whatever they claim (a DAG manager's recovery adopts what
// Jobs finds): the Owner is the one the schedd gives the caller's jobs,
// which it sets from the caller's token.
func (b *Batcher) Jobs(ctx context.Context, constraint string, proj []string, history bool, limit int) (queue, hist []wire.Job, err error) {
	sc, _, err := scheddOf(ctx, b.c, b.env)
	if err != nil {
		return nil, nil, err
	}
	owner, err := b.owner(ctx, sc)
	if err != nil {
		return nil, nil, err
	}
	req := &wire.QueryJobsRequest{Constraint: "Owner == " + classad.QuoteString(owner) + " && (" + constraint + ")", Projection: proj}
	if queue, err = sc.Queue(ctx, req); err != nil || !history {
		return queue, nil, err
	}
	hreq := *req
	hreq.Limit = limit
	if hist, err = sc.History(ctx, &hreq); err != nil {
		return nil, nil, err
	}
	return queue, hist, nil
}

// owner is the Owner the schedd gives the caller's jobs: the one a
// reservation answered, or (none yet) that of a cluster reserved to ask,
// which stays empty.
func (b *Batcher) owner(ctx context.Context, sc *wire.Schedd) (string, error) {
	b.mu.Lock()
	owner := b.owned
	b.mu.Unlock()
	if owner != "" {
		return owner, nil
	}
	nc, err := sc.NewClusters(ctx, 1)
	if err != nil {
		return "", fmt.Errorf("asking the schedd who owns this submitter's jobs: %w", err)
	}
	b.noteOwner(nc.Owner)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.owned, nil
}

// noteOwner notes the Owner of a reservation's answer: the caller's
// identity, or (an open pool, which trusts the submitter's word) the
// user condor_submit names.
func (b *Batcher) noteOwner(owner string) {
	b.mu.Lock()
	b.owned = firstNonEmpty(owner, currentUser(b.env))
	b.mu.Unlock()
}
