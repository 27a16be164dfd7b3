package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Paths of the schedd's endpoints, relative to PathPrefix.
const (
	pathNewCluster      = "schedd/newcluster"
	pathSubmit          = "schedd/submit"
	pathSubmitFactory   = "schedd/submitfactory"
	pathNewClusters     = "schedd/newclusters"
	pathSubmitBatch     = "schedd/submitbatch"
	pathSubmitDigest    = "schedd/submitdigest"
	pathQueue           = "schedd/query"
	pathQueueStream     = "schedd/querystream"
	pathQueueSummary    = "schedd/summary"
	pathAct             = "schedd/act"
	pathHistory         = "schedd/history"
	pathIdle            = "schedd/idle"
	pathMatches         = "schedd/matches"
	pathJobReport       = "schedd/jobreport"
	pathScheddClaimInfo = "schedd/claiminfo"
)

// NewClusterResponse is a cluster id a schedd reserved for one submit,
// and what a submitter needs of the schedd to make the cluster's job ads:
// the schedd's name (for GlobalJobId), its UID_DOMAIN (for User) and its
// FILESYSTEM_DOMAIN, and the Owner the schedd will give the jobs: the
// caller's authenticated identity (empty in an open pool, where the
// submitter names the Owner).
type NewClusterResponse struct {
	Cluster          int    `json:"cluster"`
	Owner            string `json:"owner,omitempty"`
	ScheddName       string `json:"schedd_name"`
	UIDDomain        string `json:"uid_domain"`
	FileSystemDomain string `json:"filesystem_domain"`
}

// SubmitRequest commits the jobs of a cluster that NewCluster reserved:
// ready job ads, in ProcId order from 0, each with its Owner. Submitting
// the same jobs to the same cluster again is a retry, answered as the
// first submit was without queueing anything.
type SubmitRequest struct {
	Cluster int  `json:"cluster"`
	Jobs    []Ad `json:"jobs"`
}

// MaxSubmitBatch bounds the clusters of one NewClusters or SubmitBatch.
const MaxSubmitBatch = 1000

// NewClustersRequest reserves Count clusters (1 to MaxSubmitBatch) at
// once, for a SubmitBatch.
type NewClustersRequest struct {
	Count int `json:"count"`
}

// NewClustersResponse is the clusters a schedd reserved, in order, and
// what NewClusterResponse tells of the schedd (its Cluster is the first).
type NewClustersResponse struct {
	NewClusterResponse
	Clusters []int `json:"clusters"`
}

// SubmitBatchRequest commits several reserved clusters, each as a
// SubmitRequest would, in one transaction of the schedd: all of them or
// none. Sending the same request again is a retry, answered as the first
// was without queueing anything.
type SubmitBatchRequest struct {
	Clusters []SubmitRequest `json:"clusters"`
}

// SubmitBatchResponse reports each committed cluster, in the request's
// order.
type SubmitBatchResponse struct {
	Clusters []SubmitResponse `json:"clusters"`
}

// SubmitFactoryRequest commits a cluster that NewCluster reserved as a
// job factory (HTCondor's late materialization): the schedd keeps the
// digest of the submit file (condor/submit's Factory.Digest) and makes
// the cluster's jobs from it, in ProcId order, as earlier ones leave
// the queue: at most MaxMaterialize of them in the queue and not done,
// at most MaxIdle of them idle (0: no bound; one of them is given).
// Sending the same request again is a retry, as for SubmitRequest.
type SubmitFactoryRequest struct {
	Cluster        int             `json:"cluster"`
	Digest         json.RawMessage `json:"digest"`
	MaxMaterialize int             `json:"max_materialize,omitempty"`
	MaxIdle        int             `json:"max_idle,omitempty"`
}

// SubmitDigestRequest commits a cluster that NewCluster reserved from
// the digest of its submit file (condor/submit's Factory.Digest): the
// schedd makes every job of the file from it, at once, as it stores
// them, so that a submit of many jobs is not sent, nor held, as the ads
// of all of them. Sending the same request again is a retry, as for
// SubmitRequest.
type SubmitDigestRequest struct {
	Cluster int             `json:"cluster"`
	Digest  json.RawMessage `json:"digest"`
}

// SubmitResponse reports the submitted cluster and its number of jobs.
type SubmitResponse struct {
	Cluster int `json:"cluster"`
	Jobs    int `json:"jobs"`
	// Factory is true for a job factory's cluster (SubmitFactory): its
	// Jobs are made as earlier ones leave the queue.
	Factory bool `json:"factory,omitempty"`
}

// QueryJobsRequest selects queued (or, in a schedd's history, finished)
// jobs: the condor_q-style arguments (cluster, cluster.proc or owner; none
// for all), the JobStatus values they must have (none for any: cheaper
// than a constraint, which reads each job's ad), a ClassAd constraint and
// a projection. Limit bounds a history query.
type QueryJobsRequest struct {
	Args       []string `json:"args,omitempty"`
	Status     []int    `json:"status,omitempty"`
	Constraint string   `json:"constraint,omitempty"`
	Projection []string `json:"projection,omitempty"`
	Limit      int      `json:"limit,omitempty"`
}

// QueryJobsResponse carries the jobs a query selected.
type QueryJobsResponse struct {
	Jobs []Job `json:"jobs"`
}

// QueueGroup counts the jobs a query selected of one cluster, owner,
// batch name and state, for condor q's summary: the ids of the first and
// last of them and the earliest QDate.
type QueueGroup struct {
	Cluster   int    `json:"cluster"`
	Owner     string `json:"owner"`
	BatchName string `json:"batch_name,omitempty"` // JobBatchName's value
	Status    int    `json:"status"`               // JobStatus
	Jobs      int    `json:"jobs"`
	FirstProc int    `json:"first_proc"`
	LastProc  int    `json:"last_proc"`
	QDate     int64  `json:"qdate"`
}

// QueueSummaryResponse counts the jobs a query selected, in cluster
// order, without their ads.
type QueueSummaryResponse struct {
	Groups []QueueGroup `json:"groups"`
	// Factories are the job factories (late materialization) of the
	// clusters of Groups that have one.
	Factories []QueueFactory `json:"factories,omitempty"`
}

// QueueFactory is a cluster's job factory, for condor q: the jobs it
// makes in all (TotalSubmitProcs) and the ProcId it makes next
// (JobMaterializeNextProcId): the procs from Next on are not yet in the
// queue.
type QueueFactory struct {
	Cluster int    `json:"cluster"`
	Owner   string `json:"owner"`
	Total   int    `json:"total"`
	Next    int    `json:"next"`
}

// Job is a queued job on the wire.
type Job struct {
	ID string `json:"id"` // cluster.proc
	Ad Ad     `json:"ad"`
}

// Actions of an ActRequest.
const (
	ActRemove  = "remove"
	ActHold    = "hold"
	ActRelease = "release"
)

// ActRequest removes, holds or releases the jobs its arguments and
// constraint select (condor_rm, condor_hold, condor_release).
type ActRequest struct {
	Action     string   `json:"action"`
	Args       []string `json:"args,omitempty"`
	Constraint string   `json:"constraint,omitempty"`
	All        bool     `json:"all,omitempty"`
	Reason     string   `json:"reason,omitempty"`
}

// ActResponse tells how many jobs the action changed. Changed lists them
// only for the jobs named one by one (cluster.proc arguments), as
// HTCondor's tools print a line for each of those and one line for a
// cluster, an owner, a constraint or all jobs, however many they are.
type ActResponse struct {
	Changed []string `json:"changed"`
	Count   int      `json:"count"`
}

// IdleRequest asks a schedd for an owner's idle jobs not already being
// started ("" for all owners). SignificantAttrs names the job attributes
// the asking negotiator's slots refer to, which the schedd's autoclusters
// keep apart; Limit, when positive, bounds the job ids of each
// autocluster in the answer (no more of its jobs can match in a cycle).
//
// Peek reads the autoclusters without being a negotiation cycle: the
// schedd does not take it for its pool's negotiator having considered its
// jobs (which lets them flock). The pool policy and the pilot factory
// peek.
//
// Negotiator is the asking negotiator's node, as MatchesRequest's: a
// schedd whose API takes calls without credentials knows by it the
// negotiator of a pool it flocks to; a credential's node, where there is
// one, is what it goes by.
type IdleRequest struct {
	Negotiator       string   `json:"negotiator,omitempty"`
	Owner            string   `json:"owner,omitempty"`
	SignificantAttrs []string `json:"significant_attrs,omitempty"`
	Limit            int      `json:"limit,omitempty"`
	Peek             bool     `json:"peek,omitempty"`
}

// IdleResponse lists idle jobs, oldest first, as autoclusters: jobs
// equal in every attribute matchmaking looks at share one ad.
type IdleResponse struct {
	Clusters []IdleCluster `json:"clusters"`
}

// IdleCluster is an autocluster of idle jobs: the ad of one of them,
// which stands for all in matchmaking, the ids of the jobs offered (in
// id order) and how many of its jobs are idle in all.
type IdleCluster struct {
	Ad    Ad       `json:"ad"`
	IDs   []string `json:"ids"`
	Count int      `json:"count"`
}

// MatchesRequest hands a schedd the matches of a negotiation cycle.
type MatchesRequest struct {
	Negotiator string  `json:"negotiator"`
	Matches    []Match `json:"matches"`
}

// Job report kinds.
const (
	ReportExited  = "exited"  // the job ran to its end (exit code or signal)
	ReportHold    = "hold"    // the starter put the job on hold (e.g. over its memory request)
	ReportEvicted = "evicted" // the job was stopped by startd policy or vacated; requeue it
	ReportUpdate  = "update"  // still running: resource usage
	// ReportCheckpoint: the job exited with its CheckpointExitCode, or
	// was evicted with WhenToTransferOutput ON_EXIT_OR_EVICT; its
	// checkpoint files (Outputs, sent with TransferHeader.Checkpoint set
	// to Checkpoint) are to be kept in the schedd's spool. A job that
	// checkpointed on its exit code goes on running under its claim.
	ReportCheckpoint = "checkpoint"
)

// JobReport is what a starter tells the schedd about a job it runs.
type JobReport struct {
	ClaimID     string  `json:"claim_id"`
	JobID       string  `json:"job_id"`
	Kind        string  `json:"kind"`
	Startd      string  `json:"startd"` // startd's API address
	SlotName    string  `json:"slot_name"`
	ExitCode    int     `json:"exit_code"`
	Signal      int     `json:"signal,omitempty"` // terminating signal, 0 when it exited
	HoldReason  string  `json:"hold_reason,omitempty"`
	HoldCode    int     `json:"hold_code,omitempty"`
	HoldSubCode int     `json:"hold_subcode,omitempty"`
	ImageSizeKB int64   `json:"image_size_kb,omitempty"`
	ResidentKB  int64   `json:"resident_kb,omitempty"`
	UserCPU     float64 `json:"user_cpu,omitempty"` // seconds
	SysCPU      float64 `json:"sys_cpu,omitempty"`
	WallClock   float64 `json:"wall_clock,omitempty"`
	// MemoryUsageMB is the most memory the job's cgroup held at once
	// (MiB), where the starter contains the job in one; CpusUsage the CPUs
	// it used on average (since the last update, or over its run).
	MemoryUsageMB int64   `json:"memory_usage_mb,omitempty"`
	CpusUsage     float64 `json:"cpus_usage,omitempty"`
	// Outputs are the output files (and stdout and stderr) of a job that
	// exited, which the starter sent beforehand (SendOutput) under the
	// same claim: the schedd puts them in place only when it holds each
	// whole, with this size and checksum.
	Outputs       []FileInfo `json:"outputs,omitempty"`
	ReceivedBytes int64      `json:"received_bytes,omitempty"`
	// Reason says why an evicted job was stopped or never started, such
	// as the machine's end time or a scratch directory it could not write.
	Reason string `json:"reason,omitempty"`
	// ClaimClosed says the claim ends with this report (the slot was
	// preempted by another claim): the schedd forgets it rather than
	// running another job under it.
	ClaimClosed bool `json:"claim_closed,omitempty"`
	// Checkpoint is the number of the checkpoint a ReportCheckpoint
	// commits: the job's NumCkpts when it started, plus one for each
	// checkpoint since.
	Checkpoint int64 `json:"checkpoint,omitempty"`
}

// Schedd is a client of a node's schedd.
type Schedd struct{ c *Client }

// NewSchedd returns a client of the schedd served at addr presenting
// token.
func NewSchedd(addr, token string) *Schedd { return NewClient(addr, token).Schedd() }

// Schedd returns a client of the schedd of c's node.
func (c *Client) Schedd() *Schedd { return &Schedd{c} }

// Addr returns the API address of the schedd's node.
func (c *Schedd) Addr() string { return c.c.Addr }

// NewCluster reserves a cluster id for a submit (the first step of
// condor_submit), durably: no other submit gets it. A cluster never
// submitted stays empty.
func (c *Schedd) NewCluster(ctx context.Context) (*NewClusterResponse, error) {
	var resp NewClusterResponse
	if err := c.c.Call(ctx, pathNewCluster, struct{}{}, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Submit commits the jobs of a reserved cluster (condor_submit); when it
// returns, the jobs are durable. It is safe to call again with the same
// request when the answer was lost.
func (c *Schedd) Submit(ctx context.Context, req *SubmitRequest) (*SubmitResponse, error) {
	var resp SubmitResponse
	if err := c.c.Call(ctx, pathSubmit, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// NewClusters reserves n cluster ids at once (1 to MaxSubmitBatch), as
// NewCluster reserves one.
func (c *Schedd) NewClusters(ctx context.Context, n int) (*NewClustersResponse, error) {
	var resp NewClustersResponse
	if err := c.c.Call(ctx, pathNewClusters, &NewClustersRequest{Count: n}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Clusters) != n {
		return nil, fmt.Errorf("the schedd reserved %d clusters, not %d", len(resp.Clusters), n)
	}
	return &resp, nil
}

// SubmitBatch commits the jobs of several reserved clusters in one
// transaction of the schedd: when it returns, all of them are durable;
// when it fails, none was queued, or (an answer lost) all were. It is
// safe to call again with the same request when the answer was lost.
func (c *Schedd) SubmitBatch(ctx context.Context, req *SubmitBatchRequest) (*SubmitBatchResponse, error) {
	var resp SubmitBatchResponse
	if err := c.c.Call(ctx, pathSubmitBatch, req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Clusters) != len(req.Clusters) {
		return nil, fmt.Errorf("the schedd answered %d clusters of a batch of %d", len(resp.Clusters), len(req.Clusters))
	}
	return &resp, nil
}

// SubmitFactory commits a reserved cluster as a job factory
// (condor_submit with max_materialize or max_idle); it is safe to call
// again with the same request when the answer was lost. The response's
// Jobs is the number of jobs the factory makes in all.
func (c *Schedd) SubmitFactory(ctx context.Context, req *SubmitFactoryRequest) (*SubmitResponse, error) {
	var resp SubmitResponse
	if err := c.c.Call(ctx, pathSubmitFactory, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// SubmitDigest commits a reserved cluster from the digest of its submit
// file (condor_submit of many jobs); when it returns, the jobs are
// durable. It is safe to call again with the same request when the
// answer was lost.
func (c *Schedd) SubmitDigest(ctx context.Context, req *SubmitDigestRequest) (*SubmitResponse, error) {
	var resp SubmitResponse
	if err := c.c.Call(ctx, pathSubmitDigest, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Queue returns the queued jobs a query selects (condor_q).
func (c *Schedd) Queue(ctx context.Context, req *QueryJobsRequest) ([]Job, error) {
	return c.jobs(ctx, pathQueue, req)
}

// QueueEach calls fn with each queued job a query selects, in job id
// order, as the schedd streams them (condor q): the first arrives at once
// and neither side holds the whole answer. An error of fn ends the query
// and is returned; so is an answer cut short (ErrCutShort).
// A schedd of an earlier version, without the streamed query (HTTP 404),
// is asked for the whole answer at once.
func (c *Schedd) QueueEach(ctx context.Context, req *QueryJobsRequest, fn func(Job) error) error {
	err := c.c.CallStream(ctx, pathQueueStream, req, func(r io.Reader) error { return ReadStream(r, fn) })
	if !notServed(err) {
		return err
	}
	jobs, err := c.Queue(ctx, req)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if err := fn(j); err != nil {
			return err
		}
	}
	return nil
}

// notServed reports whether err is a daemon's answer that it serves no
// such endpoint (one of an earlier version).
func notServed(err error) bool {
	var we *Error
	return errors.As(err, &we) && we.Status == http.StatusNotFound
}

// QueueSummary counts the queued jobs a query selects by cluster, owner,
// batch name and state (condor q's default view); the projection is
// ignored.
func (c *Schedd) QueueSummary(ctx context.Context, req *QueryJobsRequest) (*QueueSummaryResponse, error) {
	var resp QueueSummaryResponse
	if err := c.c.Call(ctx, pathQueueSummary, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// History returns the finished jobs a query selects, most recent first
// (condor_history).
func (c *Schedd) History(ctx context.Context, req *QueryJobsRequest) ([]Job, error) {
	return c.jobs(ctx, pathHistory, req)
}

func (c *Schedd) jobs(ctx context.Context, path string, req *QueryJobsRequest) ([]Job, error) {
	var resp QueryJobsResponse
	if err := c.c.Call(ctx, path, req, &resp); err != nil {
		return nil, err
	}
	return resp.Jobs, nil
}

// Act removes, holds or releases jobs (condor_rm, condor_hold,
// condor_release) and returns how many it changed (and which, of the
// jobs named one by one).
func (c *Schedd) Act(ctx context.Context, req *ActRequest) (*ActResponse, error) {
	var resp ActResponse
	if err := c.c.Call(ctx, pathAct, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Idle returns the idle jobs not being started, oldest first: each job
// with the ad of its autocluster, which matchmaking cannot tell from its
// own.
func (c *Schedd) Idle(ctx context.Context, req *IdleRequest) ([]Job, error) {
	resp, err := c.IdleClusters(ctx, req)
	if err != nil {
		return nil, err
	}
	var jobs []Job
	for _, ac := range resp.Clusters {
		for _, id := range ac.IDs {
			jobs = append(jobs, Job{ID: id, Ad: ac.Ad})
		}
	}
	return jobs, nil
}

// IdleClusters returns the schedd's idle jobs as autoclusters, as a
// negotiator asks for them.
func (c *Schedd) IdleClusters(ctx context.Context, req *IdleRequest) (*IdleResponse, error) {
	var resp IdleResponse
	if err := c.c.Call(ctx, pathIdle, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Matches hands the schedd the matches of a negotiation cycle.
func (c *Schedd) Matches(ctx context.Context, req *MatchesRequest) error {
	return c.c.Call(ctx, pathMatches, req, nil)
}

// JobReport tells the schedd about a job a starter runs.
func (c *Schedd) JobReport(ctx context.Context, r *JobReport) error {
	return c.c.Call(ctx, pathJobReport, r, nil)
}

// ClaimInfo asks whether the schedd still holds a claim, as a startd does
// about a claim left idle.
func (c *Schedd) ClaimInfo(ctx context.Context, req *ClaimInfoRequest) (*ClaimInfoResponse, error) {
	var resp ClaimInfoResponse
	if err := c.c.Call(ctx, pathScheddClaimInfo, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}
