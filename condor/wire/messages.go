package wire

// Paths of the startd's, schedd's and negotiator's endpoints, relative to
// PathPrefix, for Client.Call.
const (
	PathClaim     = "startd/claim"
	PathActivate  = "startd/activate"
	PathRelease   = "startd/release"
	PathVacate    = "startd/vacate"
	PathClaimInfo = "startd/claiminfo"
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
	PathReschedule      = "negotiator/reschedule"
	PathReconfig        = "master/reconfig"
	PathMasterInfo      = "master/info"
)

// ClaimRequest asks a startd for the slot whose claim id the negotiator
// handed out, to run Job. For a partitionable slot the startd carves a
// dynamic slot sized by the job's requests and answers its own claim id.
type ClaimRequest struct {
	ClaimID    string `json:"claim_id"`
	Job        Ad     `json:"job"`
	Schedd     string `json:"schedd"`      // the schedd's API address
	ScheddName string `json:"schedd_name"` // its Name
}

// ClaimResponse is a granted claim: the claim id to use from now on and
// the claimed slot's ad.
type ClaimResponse struct {
	ClaimID string `json:"claim_id"`
	Slot    Ad     `json:"slot"`
}

// ActivateRequest starts a job on a claimed slot. Files are the input files
// by name (the executable, when transferred, is "condor_exec.exe").
type ActivateRequest struct {
	ClaimID string            `json:"claim_id"`
	JobID   string            `json:"job_id"`
	Job     Ad                `json:"job"`
	Files   map[string][]byte `json:"files,omitempty"`
}

// ReleaseRequest gives a claim back to the startd.
type ReleaseRequest struct {
	ClaimID string `json:"claim_id"`
}

// VacateRequest stops the job running under a claim (after condor_rm or
// condor_hold); the claim stays with the schedd.
type VacateRequest struct {
	ClaimID string `json:"claim_id"`
	JobID   string `json:"job_id"`
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

// Job is a queued job on the wire.
type Job struct {
	ID string `json:"id"` // cluster.proc
	Ad Ad     `json:"ad"`
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

// Match is one job matched to a slot by the negotiator.
type Match struct {
	JobID    string `json:"job_id"`
	SlotName string `json:"slot_name"`
	Startd   string `json:"startd"` // the startd's API address
	ClaimID  string `json:"claim_id"`
	Slot     Ad     `json:"slot"`
}

// MatchesRequest hands a schedd the matches of a negotiation cycle.
type MatchesRequest struct {
	Negotiator string  `json:"negotiator"`
	Matches    []Match `json:"matches"`
}

// ClaimInfoRequest asks a startd about a claim, as a restarted schedd does
// to reconnect to the jobs it had running.
type ClaimInfoRequest struct {
	ClaimID string `json:"claim_id"`
	// Schedd and ScheddName, when a schedd asks, are its API address and
	// Name: a startd whose claim was made by that schedd at another address
	// (it was restarted elsewhere) sends the job's report to this one.
	Schedd     string `json:"schedd,omitempty"`
	ScheddName string `json:"schedd_name,omitempty"`
}

// ClaimInfoResponse says whether the claim exists and runs (or is still
// reporting on) a job.
type ClaimInfoResponse struct {
	Exists bool   `json:"exists"`
	JobID  string `json:"job_id,omitempty"`
	Active bool   `json:"active"`
}
