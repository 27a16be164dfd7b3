package schedd

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// NewCluster reserves a cluster id in the job queue for one submit and
// answers it with what the submitter needs to make the cluster's job ads,
// as HTCondor's schedd answers condor_submit's NewCluster, including the
// Owner it will give them (the caller's authenticated identity).
func (s *Schedd) NewCluster(ctx context.Context, _ *struct{}) (*wire.NewClusterResponse, error) {
	cluster, err := s.q.NewCluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("reserving a cluster: %w", err)
	}
	fs, _ := s.opts.Config.Get("FILESYSTEM_DOMAIN")
	return &wire.NewClusterResponse{Cluster: cluster, Owner: callerOf(ctx).name, ScheddName: s.opts.Name, UIDDomain: s.uid,
		FileSystemDomain: firstNonEmpty(fs, s.opts.Name)}, nil
}

// Submit commits the jobs of a reserved cluster in one transaction, writes
// their submit events and asks the negotiator for a cycle. When Submit
// answers, the jobs are durable. A retry of a submit that was committed
// gets the same answer and changes nothing. The jobs' Owner is the
// caller's authenticated identity (see ownJob).
func (s *Schedd) Submit(ctx context.Context, req *wire.SubmitRequest) (*wire.SubmitResponse, error) {
	return s.submitAds(ctx, req.Cluster, len(req.Jobs), func(proc int) wire.Ad { return req.Jobs[proc] })
}

// submitAds is Submit of n jobs, jobAt(i) giving the ad of job i, which
// the schedd may change: the jobs are checked, their Owner set and the
// submission named in a first pass, and then made again and stored one
// at a time, so that a caller that keeps the ads of a cluster's jobs
// sparse (the cluster's attributes once, each proc's own) never has them
// all whole.
func (s *Schedd) submitAds(ctx context.Context, cluster, n int, jobAt func(int) wire.Ad) (*wire.SubmitResponse, error) {
	if err := checkSubmit(cluster, n); err != nil {
		return nil, err
	}
	who := callerOf(ctx)
	owners := map[string]int{}
	name := newSubmission()
	for proc := range n {
		j := jobAt(proc)
		if err := s.admitJob(who, cluster, proc, j, owners); err != nil {
			return nil, err
		}
		name.add(j)
	}
	return s.submitEach(ctx, cluster, n, owners, name.sum(), func(proc int) (jobqueue.Ad, error) {
		j := jobAt(proc)
		if err := s.ownJob(who, cluster, proc, j); err != nil {
			return nil, err
		}
		return s.clusterJob(cluster, proc, j), nil
	})
}

// bigSubmit is the size of a submit after which the schedd gives the
// memory it took back to the system at once.
const bigSubmit = 10000

// submitEach checks the queue limits for n jobs (owners: how many of them
// each owner has) and commits them to a reserved cluster in one
// transaction, build making each job as it is stored (jobqueue's
// SubmitClusterEach): the schedd never holds the ads of all of them.
// Then it writes their submit events and asks the negotiator for a cycle.
// A build error is a bad request, and queues nothing.
func (s *Schedd) submitEach(ctx context.Context, cluster, n int, owners map[string]int, submission string, build func(int) (jobqueue.Ad, error)) (*wire.SubmitResponse, error) {
	s.submitLim.mu.Lock()
	err := s.checkQueueLimits(ctx, []int{cluster}, owners, n)
	var retry bool
	if err == nil {
		retry, err = s.q.SubmitClusterEach(ctx, cluster, n, submission, func(proc int) (jobqueue.Ad, error) {
			j, err := build(proc)
			if err != nil {
				return nil, &factoryError{err}
			}
			return j, nil
		})
	}
	s.submitLim.mu.Unlock()
	if n >= bigSubmit {
		defer debug.FreeOSMemory()
	}
	switch {
	case errors.Is(err, jobqueue.ErrNoCluster):
		return nil, fmt.Errorf("%w: cluster %d was not reserved (NewCluster first)", wire.ErrNotFound, cluster)
	case errors.Is(err, wire.ErrConflict):
		return nil, err
	case errors.Is(err, jobqueue.ErrClusterCommitted):
		return nil, fmt.Errorf("%w: cluster %d was already submitted with other jobs", wire.ErrConflict, cluster)
	case errors.As(err, new(*factoryError)):
		return nil, fmt.Errorf("%w: submitting cluster %d: %w", wire.ErrBadRequest, cluster, err)
	case err != nil:
		return nil, fmt.Errorf("submitting cluster %d: %w", cluster, err)
	}
	// A retry offers the cluster's idle jobs again, in case the first
	// attempt failed after its commit, but writes no second submit events.
	if err := s.submitted(ctx, cluster, !retry); err != nil {
		return nil, err
	}
	if !retry {
		s.metrics.submitted(n)
	}
	return &wire.SubmitResponse{Cluster: cluster, Jobs: n}, nil
}

// NewClusters reserves req.Count clusters in one transaction, as
// NewCluster reserves one, for a SubmitBatch.
func (s *Schedd) NewClusters(ctx context.Context, req *wire.NewClustersRequest) (*wire.NewClustersResponse, error) {
	if req.Count < 1 || req.Count > wire.MaxSubmitBatch {
		return nil, fmt.Errorf("%w: %d clusters asked for: from 1 to %d at once", wire.ErrBadRequest, req.Count, wire.MaxSubmitBatch)
	}
	clusters, err := s.q.NewClusters(ctx, req.Count)
	if err != nil {
		return nil, fmt.Errorf("reserving %d clusters: %w", req.Count, err)
	}
	fs, _ := s.opts.Config.Get("FILESYSTEM_DOMAIN")
	return &wire.NewClustersResponse{NewClusterResponse: wire.NewClusterResponse{Cluster: clusters[0], Owner: callerOf(ctx).name,
		ScheddName: s.opts.Name, UIDDomain: s.uid, FileSystemDomain: firstNonEmpty(fs, s.opts.Name)}, Clusters: clusters}, nil
}

// SubmitBatch commits several reserved clusters, each checked as Submit
// checks one, in one transaction: all of them or none. The queue limits
// count the jobs of the batch together, MAX_JOBS_PER_SUBMISSION bounding
// each cluster. Their submit events are written once the transaction is
// committed, and the negotiator is asked for one cycle. A retry of a
// committed batch gets the same answer and changes nothing.
func (s *Schedd) SubmitBatch(ctx context.Context, req *wire.SubmitBatchRequest) (*wire.SubmitBatchResponse, error) {
	if len(req.Clusters) == 0 || len(req.Clusters) > wire.MaxSubmitBatch {
		return nil, fmt.Errorf("%w: a batch of %d clusters: from 1 to %d at once", wire.ErrBadRequest, len(req.Clusters), wire.MaxSubmitBatch)
	}
	who := callerOf(ctx)
	cs := make([]jobqueue.ClusterSubmit, len(req.Clusters))
	clusters := make([]int, len(req.Clusters))
	owners := map[string]int{}
	largest := 0
	seen := map[int]bool{}
	for i := range req.Clusters {
		c := &req.Clusters[i]
		if seen[c.Cluster] {
			return nil, fmt.Errorf("%w: cluster %d is twice in the batch", wire.ErrBadRequest, c.Cluster)
		}
		seen[c.Cluster] = true
		if err := checkSubmit(c.Cluster, len(c.Jobs)); err != nil {
			return nil, err
		}
		name := newSubmission()
		jobs := make([]jobqueue.Ad, len(c.Jobs))
		for proc, j := range c.Jobs {
			if err := s.admitJob(who, c.Cluster, proc, j, owners); err != nil {
				return nil, err
			}
			name.add(j)
			jobs[proc] = s.clusterJob(c.Cluster, proc, j)
		}
		cs[i] = jobqueue.ClusterSubmit{Cluster: c.Cluster, Jobs: jobs, Submission: name.sum()}
		clusters[i] = c.Cluster
		largest = max(largest, len(jobs))
	}
	s.submitLim.mu.Lock()
	err := s.checkQueueLimits(ctx, clusters, owners, largest)
	var retry []bool
	if err == nil {
		retry, err = s.q.SubmitClusters(ctx, cs)
	}
	s.submitLim.mu.Unlock()
	switch {
	case errors.Is(err, jobqueue.ErrNoCluster):
		return nil, fmt.Errorf("%w: %w (NewClusters first)", wire.ErrNotFound, err)
	case errors.Is(err, wire.ErrConflict):
		return nil, err
	case errors.Is(err, jobqueue.ErrClusterCommitted):
		return nil, fmt.Errorf("%w: %w with other jobs", wire.ErrConflict, err)
	case err != nil:
		return nil, fmt.Errorf("submitting a batch of %d clusters: %w", len(cs), err)
	}
	// The negotiator is asked for one cycle for the whole batch.
	defer s.wakeAfterSubmit()
	resp := &wire.SubmitBatchResponse{Clusters: make([]wire.SubmitResponse, len(cs))}
	for i, c := range cs {
		if err := s.offer(ctx, c.Cluster, jobqueue.ClusterJobs(c.Cluster), !retry[i]); err != nil {
			return nil, err
		}
		if !retry[i] {
			s.metrics.submitted(len(c.Jobs))
		}
		resp.Clusters[i] = wire.SubmitResponse{Cluster: c.Cluster, Jobs: len(c.Jobs)}
	}
	return resp, nil
}

// SubmitDigest commits a reserved cluster from the digest of its submit
// file (condor/submit's Factory.Digest), as Submit commits the jobs it
// is sent: the schedd makes each job from the digest as it stores it,
// so that neither the request nor the schedd holds the ads of a large
// cluster. The jobs get the Owner the schedd authenticated, and the
// queue limits are checked for all of them before any is stored. A job
// the digest cannot make refuses the whole submit.
func (s *Schedd) SubmitDigest(ctx context.Context, req *wire.SubmitDigestRequest) (*wire.SubmitResponse, error) {
	if req.Cluster <= 0 {
		return nil, fmt.Errorf("%w: cluster %d: reserve one with NewCluster", wire.ErrBadRequest, req.Cluster)
	}
	fa, err := s.digestFactory(ctx, req.Cluster, req.Digest)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "digest %d\n", len(req.Digest))
	h.Write(req.Digest)
	n := fa.Total()
	return s.submitEach(ctx, req.Cluster, n, map[string]int{fa.Owner(): n}, "digest:"+hex.EncodeToString(h.Sum(nil)),
		func(proc int) (jobqueue.Ad, error) {
			j, err := fa.Job(proc)
			if err != nil {
				return nil, err
			}
			ad := jobqueue.Ad(j)
			if _, ok := ad["GlobalJobId"]; !ok {
				ad["GlobalJobId"] = s.globalJobID(req.Cluster, proc)
			}
			return ad, nil
		})
}

// digestFactory remakes the factory of a submit digest for cluster with
// the schedd's name and UID_DOMAIN, refusing one whose Owner is not the
// caller (but for an administrator) or that makes no job.
func (s *Schedd) digestFactory(ctx context.Context, cluster int, digest []byte) (*submit.Factory, error) {
	who := callerOf(ctx)
	var asked string
	fa, err := submit.FactoryFromDigest(ctx, digest, func(o *submit.Options) {
		asked = o.Owner
		o.ClusterID, o.ScheddName, o.UIDDomain = cluster, s.opts.Name, s.uid
	})
	if err != nil {
		return nil, fmt.Errorf("%w: cluster %d: %w", wire.ErrBadRequest, cluster, err)
	}
	if who.name != "" && asked != who.name && !who.admin {
		return nil, fmt.Errorf("%w: cluster %d names Owner %q but the caller is %q; only an administrator submits for others",
			wire.ErrForbidden, cluster, asked, who.name)
	}
	if fa.Total() == 0 {
		return nil, fmt.Errorf("%w: cluster %d: the submit file queues no jobs", wire.ErrBadRequest, cluster)
	}
	return fa, nil
}

// checkSubmit checks a submit of n jobs to cluster: a cluster reserved
// with NewCluster (or NewClusters) and at least one job.
func checkSubmit(cluster, n int) error {
	if cluster <= 0 {
		return fmt.Errorf("%w: cluster %d: reserve one with NewCluster", wire.ErrBadRequest, cluster)
	}
	if n == 0 {
		return fmt.Errorf("%w: submit of no jobs to cluster %d", wire.ErrBadRequest, cluster)
	}
	return nil
}

// admitJob sets the Owner of job proc of a submit to cluster from the
// caller who (ownJob), checks the job (checkJob) and counts it in owners
// under its Owner, for the queue limits: the first pass over a submit's
// jobs, which keeps none of them.
func (s *Schedd) admitJob(who caller, cluster, proc int, j wire.Ad, owners map[string]int) error {
	if err := s.ownJob(who, cluster, proc, j); err != nil {
		return err
	}
	if err := checkJob(cluster, proc, j); err != nil {
		return fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	o, _ := classad.UnquoteString(j["Owner"])
	owners[o]++
	return nil
}

// checkJob checks job proc of a submit to cluster, which has an Owner,
// and says (if it says) the cluster and the ProcId of its place.
func checkJob(cluster, proc int, j wire.Ad) error {
	if v, ok := j["ClusterId"]; ok && strings.TrimSpace(v) != strconv.Itoa(cluster) {
		return fmt.Errorf("job %d of cluster %d was made for cluster %s", proc, cluster, v)
	}
	if v, ok := j["ProcId"]; ok && strings.TrimSpace(v) != strconv.Itoa(proc) {
		return fmt.Errorf("job %d of cluster %d has ProcId %s", proc, cluster, v)
	}
	return nil
}

// clusterJob is job j of a submit (checkJob) as the job queue stores
// it, with a GlobalJobId unless it has one.
func (s *Schedd) clusterJob(cluster, proc int, j wire.Ad) jobqueue.Ad {
	a := make(jobqueue.Ad, len(j)+1)
	maps.Copy(a, j)
	if _, ok := a["GlobalJobId"]; !ok {
		a["GlobalJobId"] = s.globalJobID(cluster, proc)
	}
	return a
}

// globalJobID is the GlobalJobId the schedd gives a job submitted now.
func (s *Schedd) globalJobID(cluster, proc int) string {
	return classad.QuoteString(fmt.Sprintf("%s#%d.%d#%d", s.opts.Name, cluster, proc, s.now().Unix()))
}

// submitted offers the idle jobs of a committed cluster to the negotiator
// and, with events, writes their submit events. It reads the cluster back
// a page at a time and parses each attribute text its jobs share once,
// so that a large cluster costs neither all its ads at once nor a parse
// of each.
func (s *Schedd) submitted(ctx context.Context, cluster int, events bool) error {
	return s.submittedSel(ctx, cluster, jobqueue.ClusterJobs(cluster), events)
}

// submittedSel is submitted for the jobs sel selects of cluster.
func (s *Schedd) submittedSel(ctx context.Context, cluster int, sel jobqueue.Selector, events bool) error {
	defer s.wakeAfterSubmit()
	return s.offer(ctx, cluster, sel, events)
}

// wakeAfterSubmit marks the schedd's ads stale and asks the negotiator
// for a cycle, once a submit's jobs are offered.
func (s *Schedd) wakeAfterSubmit() {
	s.markDirty()
	s.reschedule()
}

// offer is submittedSel without the wake-up: it writes the submit events
// of the jobs sel selects of cluster (with events) and offers the idle
// ones to the negotiator, so that a batch of clusters wakes it once.
func (s *Schedd) offer(ctx context.Context, cluster int, sel jobqueue.Selector, events bool) error {
	parse := adParser{}
	err := s.q.Scan(ctx, sel, nil, func(j jobqueue.Job) error {
		ad, err := parse.ad(j.Ad)
		if err != nil {
			s.log.Warn("unparsable job ad", "job", j.ID, "err", err)
			return nil
		}
		ja := &ownAd{ad: ad, w: j.Ad}
		if events {
			// SubmitEventNotes (submit_event_notes) is the event's note:
			// a DAG manager's "DAG Node: NAME", which its recovery reads.
			notes, _ := ja.ad.EvalAttr("SubmitEventNotes").StringValue()
			s.writeEvent(ctx, j.ID, ja.ad, joblog.Event{Type: joblog.Submit, Host: "<" + s.opts.Address + ">", Notes: notes})
		}
		if j.Status == jobqueue.Idle && s.deferStart(ctx, j.ID, ja.ad) {
			return nil
		}
		if j.Status == jobqueue.Idle && isLocal(ja.ad) {
			s.startLocal(j.ID)
		} else if j.Status == jobqueue.Idle {
			s.mu.Lock()
			if _, busy := s.active[j.ID]; !busy && s.idle.get(j.ID) == nil {
				s.idle.put(j.ID, s.idleEntry(j.Owner, s.now(), ja))
			}
			s.mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading submitted cluster %d: %w", cluster, err)
	}
	return nil
}

// adParser parses job ads as wire.ToClassAd does, each distinct
// attribute text once: the jobs of a cluster share most of them. Parsed
// expressions are not changed once parsed, so ads may share them; but
// for a text that may hold a record literal ("["), whose nested ad takes
// the first ad it is set in as its parent scope, each ad gets its own.
type adParser map[string]classad.Expr

// shareable says whether the expression of text may be shared by ads.
func shareable(text string) bool { return !strings.Contains(text, "[") }

// maxParsed bounds the texts an adParser keeps (a cluster whose jobs
// differ in many attributes).
const maxParsed = 1 << 14

func (p adParser) ad(a wire.Ad) (*classad.Ad, error) {
	if len(p) > maxParsed {
		clear(p)
	}
	names := make([]string, 0, len(a))
	for k := range a {
		names = append(names, k)
	}
	slices.Sort(names)
	ad := classad.NewAdSize(len(names))
	for _, k := range names {
		text := a[k]
		e, ok := p[text]
		if !ok {
			var err error
			if e, err = classad.ParseExpr(text); err != nil {
				return nil, fmt.Errorf("attribute %s: %w", k, err)
			}
			if shareable(text) {
				p[text] = e
			}
		}
		ad.Set(k, e)
	}
	return ad, nil
}

// sharedParser is an adParser that goroutines share: what one parses,
// the others find parsed.
type sharedParser struct {
	mu sync.Mutex
	p  adParser
}

// ad parses a as wire.ToClassAd does, each distinct text once.
func (sp *sharedParser) ad(a wire.Ad) (*classad.Ad, error) {
	names := make([]string, 0, len(a))
	for k := range a {
		names = append(names, k)
	}
	slices.Sort(names)
	exprs := make([]classad.Expr, len(names))
	sp.mu.Lock()
	if sp.p == nil || len(sp.p) > maxParsed {
		sp.p = adParser{}
	}
	missing := 0
	for i, k := range names {
		if e, ok := sp.p[a[k]]; ok {
			exprs[i] = e
		} else {
			missing++
		}
	}
	sp.mu.Unlock()
	if missing > 0 {
		parsed := make(map[string]classad.Expr, missing)
		for i, k := range names {
			if exprs[i] != nil {
				continue
			}
			e, err := classad.ParseExpr(a[k])
			if err != nil {
				return nil, fmt.Errorf("attribute %s: %w", k, err)
			}
			exprs[i] = e
			if shareable(a[k]) {
				parsed[a[k]] = e
			}
		}
		sp.mu.Lock()
		for text, e := range parsed {
			sp.p[text] = e
		}
		sp.mu.Unlock()
	}
	ad := classad.NewAdSize(len(names))
	for i, k := range names {
		ad.Set(k, exprs[i])
	}
	return ad, nil
}

// submissionName is the digest of a submit's jobs, a job at a time.
type submissionName struct {
	h    hash.Hash
	n    [binary.MaxVarintLen64]byte
	keys []string
}

func newSubmission() *submissionName { return &submissionName{h: sha256.New()} }

func (s *submissionName) str(v string) {
	s.h.Write(s.n[:binary.PutUvarint(s.n[:], uint64(len(v)))])
	io.WriteString(s.h, v)
}

// add adds the next job.
func (s *submissionName) add(j wire.Ad) {
	s.keys = s.keys[:0]
	for k := range j {
		s.keys = append(s.keys, k)
	}
	slices.Sort(s.keys)
	s.h.Write(s.n[:binary.PutUvarint(s.n[:], uint64(len(s.keys)))])
	for _, k := range s.keys {
		s.str(k)
		s.str(j[k])
	}
}

// sum names the submission of the jobs added.
func (s *submissionName) sum() string { return hex.EncodeToString(s.h.Sum(nil)) }
