package wire

// Paths of the schedd's endpoints, relative to PathPrefix.
const (
	PathSubmit    = "schedd/submit"
	PathQueue     = "schedd/query"
	PathAct       = "schedd/act"
	PathHistory   = "schedd/history"
	PathIdle      = "schedd/idle"
	PathMatches   = "schedd/matches"
	PathJobReport = "schedd/jobreport"
	// PathScheddClaimInfo asks a schedd whether it still holds a claim
	// (ClaimInfoRequest, answered with a ClaimInfoResponse), as a startd
	// does about a claim left idle.
	PathScheddClaimInfo = "schedd/claiminfo"
)

// SubmitRequest submits one cluster: either ready job ads (Jobs; the schedd
// assigns ClusterId and ProcId) or a submit description file (File) that the
// schedd expands for the cluster id it allocates, with the submitter's
// context (its directory, user name, environment and extra macros).
type SubmitRequest struct {
	Jobs      []Ad              `json:"jobs,omitempty"`
	File      string            `json:"file,omitempty"`
	FileName  string            `json:"file_name,omitempty"`
	SubmitDir string            `json:"submit_dir,omitempty"`
	Owner     string            `json:"owner,omitempty"`
	Env       []string          `json:"env,omitempty"`
	Macros    map[string]string `json:"macros,omitempty"`
}

// SubmitResponse reports the submitted cluster and its number of jobs.
type SubmitResponse struct {
	Cluster int `json:"cluster"`
	Jobs    int `json:"jobs"`
}

// QueryJobsRequest selects queued (or, in a schedd's history, finished)
// jobs: the condor_q-style arguments (cluster, cluster.proc or owner; none
// for all), a ClassAd constraint and a projection. Limit bounds a history
// query.
type QueryJobsRequest struct {
	Args       []string `json:"args,omitempty"`
	Constraint string   `json:"constraint,omitempty"`
	Projection []string `json:"projection,omitempty"`
	Limit      int      `json:"limit,omitempty"`
}

// QueryJobsResponse carries the jobs a query selected.
type QueryJobsResponse struct {
	Jobs []Job `json:"jobs"`
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

// ActResponse lists the jobs the action changed.
type ActResponse struct {
	Changed []string `json:"changed"`
}

// IdleRequest asks a schedd for an owner's idle jobs not already being
// started ("" for all owners).
type IdleRequest struct {
	Owner string `json:"owner,omitempty"`
}

// IdleResponse lists idle jobs, oldest first.
type IdleResponse struct {
	Jobs []Job `json:"jobs"`
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
)

// JobReport is what a starter tells the schedd about a job it runs.
type JobReport struct {
	ClaimID       string            `json:"claim_id"`
	JobID         string            `json:"job_id"`
	Kind          string            `json:"kind"`
	Startd        string            `json:"startd"` // startd's API address
	SlotName      string            `json:"slot_name"`
	ExitCode      int               `json:"exit_code"`
	Signal        int               `json:"signal,omitempty"` // terminating signal, 0 when it exited
	HoldReason    string            `json:"hold_reason,omitempty"`
	HoldCode      int               `json:"hold_code,omitempty"`
	HoldSubCode   int               `json:"hold_subcode,omitempty"`
	ImageSizeKB   int64             `json:"image_size_kb,omitempty"`
	ResidentKB    int64             `json:"resident_kb,omitempty"`
	UserCPU       float64           `json:"user_cpu,omitempty"` // seconds
	SysCPU        float64           `json:"sys_cpu,omitempty"`
	WallClock     float64           `json:"wall_clock,omitempty"`
	Files         map[string][]byte `json:"files,omitempty"` // output files by name
	Stdout        []byte            `json:"stdout,omitempty"`
	Stderr        []byte            `json:"stderr,omitempty"`
	ReceivedBytes int64             `json:"received_bytes,omitempty"`
}
