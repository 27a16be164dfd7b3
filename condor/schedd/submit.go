package schedd

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
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
// caller's authenticated identity (see owners).
func (s *Schedd) Submit(ctx context.Context, req *wire.SubmitRequest) (*wire.SubmitResponse, error) {
	if err := s.owners(ctx, req); err != nil {
		return nil, err
	}
	jobs, err := s.clusterJobs(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	s.submitLim.mu.Lock()
	err = s.checkQueueLimits(ctx, []int{req.Cluster}, jobs, len(jobs))
	var retry bool
	if err == nil {
		retry, err = s.q.SubmitCluster(ctx, req.Cluster, jobs, submission(req.Jobs))
	}
	s.submitLim.mu.Unlock()
	switch {
	case errors.Is(err, jobqueue.ErrNoCluster):
		return nil, fmt.Errorf("%w: cluster %d was not reserved (NewCluster first)", wire.ErrNotFound, req.Cluster)
	case errors.Is(err, wire.ErrConflict):
		return nil, err
	case errors.Is(err, jobqueue.ErrClusterCommitted):
		return nil, fmt.Errorf("%w: cluster %d was already submitted with other jobs", wire.ErrConflict, req.Cluster)
	case err != nil:
		return nil, fmt.Errorf("submitting cluster %d: %w", req.Cluster, err)
	}
	// A retry offers the cluster's idle jobs again, in case the first
	// attempt failed after its commit, but writes no second submit events.
	if err := s.submitted(ctx, req.Cluster, !retry); err != nil {
		return nil, err
	}
	if !retry {
		s.metrics.submitted(len(jobs))
	}
	return &wire.SubmitResponse{Cluster: req.Cluster, Jobs: len(req.Jobs)}, nil
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
// checks one, in one transaction: all of them or none. Their submit
// events are written once the transaction is committed. A retry of a
// committed batch gets the same answer and changes nothing.
func (s *Schedd) SubmitBatch(ctx context.Context, req *wire.SubmitBatchRequest) (*wire.SubmitBatchResponse, error) {
	if len(req.Clusters) == 0 || len(req.Clusters) > wire.MaxSubmitBatch {
		return nil, fmt.Errorf("%w: a batch of %d clusters: from 1 to %d at once", wire.ErrBadRequest, len(req.Clusters), wire.MaxSubmitBatch)
	}
	cs := make([]jobqueue.ClusterSubmit, len(req.Clusters))
	clusters := make([]int, len(req.Clusters))
	var all []jobqueue.Ad
	largest := 0
	seen := map[int]bool{}
	for i := range req.Clusters {
		c := &req.Clusters[i]
		if seen[c.Cluster] {
			return nil, fmt.Errorf("%w: cluster %d is twice in the batch", wire.ErrBadRequest, c.Cluster)
		}
		seen[c.Cluster] = true
		if err := s.owners(ctx, c); err != nil {
			return nil, err
		}
		jobs, err := s.clusterJobs(c)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
		}
		cs[i] = jobqueue.ClusterSubmit{Cluster: c.Cluster, Jobs: jobs, Submission: submission(c.Jobs)}
		clusters[i] = c.Cluster
		all = append(all, jobs...)
		largest = max(largest, len(jobs))
	}
	s.submitLim.mu.Lock()
	// The queue's limits count the batch's jobs together.
	err := s.checkQueueLimits(ctx, clusters, all, largest)
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

// clusterJobs checks the ads of a submit and returns them as the job
// queue stores them: each job has an Owner, says (if it says) the cluster
// and the ProcId of its place, and gets a GlobalJobId unless it has one.
func (s *Schedd) clusterJobs(req *wire.SubmitRequest) ([]jobqueue.Ad, error) {
	if req.Cluster <= 0 {
		return nil, fmt.Errorf("cluster %d: reserve one with NewCluster", req.Cluster)
	}
	if len(req.Jobs) == 0 {
		return nil, fmt.Errorf("submit of no jobs to cluster %d", req.Cluster)
	}
	jobs := make([]jobqueue.Ad, len(req.Jobs))
	for i, j := range req.Jobs {
		if _, ok := j["Owner"]; !ok {
			return nil, fmt.Errorf("job %d.%d has no Owner", req.Cluster, i)
		}
		if v, ok := j["ClusterId"]; ok && strings.TrimSpace(v) != strconv.Itoa(req.Cluster) {
			return nil, fmt.Errorf("job %d of cluster %d was made for cluster %s", i, req.Cluster, v)
		}
		if v, ok := j["ProcId"]; ok && strings.TrimSpace(v) != strconv.Itoa(i) {
			return nil, fmt.Errorf("job %d of cluster %d has ProcId %s", i, req.Cluster, v)
		}
		a := make(jobqueue.Ad, len(j)+1)
		for k, v := range j {
			a[k] = v
		}
		if _, ok := a["GlobalJobId"]; !ok {
			a["GlobalJobId"] = classad.QuoteString(fmt.Sprintf("%s#%d.%d#%d", s.opts.Name, req.Cluster, i, s.now().Unix()))
		}
		jobs[i] = a
	}
	return jobs, nil
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
// expressions are not changed once parsed, so ads may share them.
type adParser map[string]classad.Expr

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
	ad := classad.NewAd()
	for _, k := range names {
		text := a[k]
		e, ok := p[text]
		if !ok {
			var err error
			if e, err = classad.ParseExpr(text); err != nil {
				return nil, fmt.Errorf("attribute %s: %w", k, err)
			}
			p[text] = e
		}
		ad.Set(k, e)
	}
	return ad, nil
}

// submission names a submit by a digest of its jobs, so that a retry of
// the same jobs is told from another submit to the same cluster.
func submission(jobs []wire.Ad) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	str := func(v string) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(v)))])
		io.WriteString(h, v)
	}
	var keys []string
	for _, j := range jobs {
		keys = keys[:0]
		for k := range j {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(keys)))])
		for _, k := range keys {
			str(k)
			str(j[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
