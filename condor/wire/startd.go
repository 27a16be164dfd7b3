package wire

import (
	"context"
	"time"
)

// Paths of the startd's endpoints, relative to PathPrefix.
const (
	pathClaim           = "startd/claim"
	pathActivate        = "startd/activate"
	pathRelease         = "startd/release"
	pathVacate          = "startd/vacate"
	pathStartdClaimInfo = "startd/claiminfo"
	pathQuarantine      = "startd/quarantine"
	pathDrain           = "startd/drain"
)

// ClaimRequest asks a startd for the slot whose claim id the negotiator
// handed out, to run Job. For a partitionable slot the startd carves a
// dynamic slot sized by the job's requests and answers its own claim id.
type ClaimRequest struct {
	ClaimID    string `json:"claim_id"`
	Job        Ad     `json:"job"`
	Schedd     string `json:"schedd"`      // the schedd's API address
	ScheddName string `json:"schedd_name"` // its Name
	// Epoch is the epoch of the negotiator that made the match (Match.Epoch).
	Epoch int64 `json:"epoch,omitempty"`
	// Preempts are the dynamic slots of the partitionable slot ClaimID
	// names that the job preempts (Match.Preempts).
	Preempts []PreemptedSlot `json:"preempts,omitempty"`
}

// ClaimResponse is a granted claim: the claim id to use from now on and
// the claimed slot's ad.
type ClaimResponse struct {
	ClaimID string `json:"claim_id"`
	Slot    Ad     `json:"slot"`
}

// ActivateRequest starts a job on a claimed slot. Inputs are the input
// files the schedd sent the startd for the job beforehand (SendInput),
// which the startd must hold whole, each with its size and checksum (the
// executable, when transferred, is "condor_exec.exe").
type ActivateRequest struct {
	ClaimID string     `json:"claim_id"`
	JobID   string     `json:"job_id"`
	Job     Ad         `json:"job"`
	Inputs  []FileInfo `json:"inputs,omitempty"`
}

// HasInput reports whether the request lists the input file name.
func (r *ActivateRequest) HasInput(name string) bool {
	for _, f := range r.Inputs {
		if f.Name == name {
			return true
		}
	}
	return false
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

// ClaimInfoRequest asks about a claim: a restarted schedd asks a startd, to
// reconnect to the jobs it had running, and a startd asks a schedd about a
// claim left idle.
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
	// Machine is the answering startd's machine name: a schedd asking at
	// an address its startd has left (a worker whose relay gave it
	// another port) may find another machine's startd there.
	Machine string `json:"machine,omitempty"`
}

// QuarantineRequest asks a startd about its quarantine (a machine whose
// jobs fail fast again and again takes no job for a while); Lift ends the
// quarantine, as an administrator may.
type QuarantineRequest struct {
	Lift bool   `json:"lift,omitempty"`
	Why  string `json:"why,omitempty"` // for the startd's log
}

// QuarantineResponse is the machine's quarantine, after the request.
type QuarantineResponse struct {
	Machine     string    `json:"machine"`
	Quarantined bool      `json:"quarantined"`
	Reason      string    `json:"reason,omitempty"`
	Since       time.Time `json:"since,omitzero"`
	Until       time.Time `json:"until,omitzero"`
	// Lifted says that the request ended a quarantine.
	Lifted bool `json:"lifted,omitempty"`
	// EndTime is when the machine goes away (PondEndTime), if it knows.
	EndTime time.Time `json:"end_time,omitzero"`
}

// Drain schedules, as condor_drain's: how a drained machine's running jobs
// are evicted.
const (
	// DrainGraceful lets the jobs run out their retirement time
	// (MaxJobRetirementTime), then vacates them.
	DrainGraceful = "graceful"
	// DrainQuick vacates the jobs at once, with their vacate time
	// (MachineMaxVacateTime, JobMaxVacateTime).
	DrainQuick = "quick"
	// DrainFast kills the jobs at once.
	DrainFast = "fast"
)

// DrainRequest drains a machine, as condor_drain does: it takes no new job
// and its running jobs are evicted as Schedule says (DrainGraceful when
// empty), until a request with Cancel ends the drain.
type DrainRequest struct {
	Schedule string `json:"schedule,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Cancel   bool   `json:"cancel,omitempty"`
	// RequestID, with Cancel, cancels only the drain of that id.
	RequestID string `json:"request_id,omitempty"`
}

// DrainResponse is the machine's drain, after the request.
type DrainResponse struct {
	Machine  string `json:"machine"`
	Draining bool   `json:"draining"`
	// Schedule, Reason, RequestID and Since describe the drain under way,
	// or the one a Cancel ended.
	Schedule  string    `json:"schedule,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	// Running is how many jobs still run on the machine; Evicting how
	// many of them are being evicted.
	Running  int `json:"running"`
	Evicting int `json:"evicting"`
	// Cancelled says that the request ended a drain; Resumed is how many
	// retiring jobs it let run on.
	Cancelled bool `json:"cancelled,omitempty"`
	Resumed   int  `json:"resumed,omitempty"`
}

// Startd is a client of a node's startd.
type Startd struct{ c *Client }

// NewStartd returns a client of the startd served at addr presenting
// token.
func NewStartd(addr, token string) *Startd { return NewClient(addr, token).Startd() }

// Startd returns a client of the startd of c's node.
func (c *Client) Startd() *Startd { return &Startd{c} }

// Addr returns the API address of the startd's node.
func (c *Startd) Addr() string { return c.c.Addr }

// Claim claims the slot a negotiator matched.
func (c *Startd) Claim(ctx context.Context, req *ClaimRequest) (*ClaimResponse, error) {
	var resp ClaimResponse
	if err := c.c.Call(ctx, pathClaim, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Activate starts a job on a claimed slot.
func (c *Startd) Activate(ctx context.Context, req *ActivateRequest) error {
	return c.c.Call(ctx, pathActivate, req, nil)
}

// Release gives a claim back.
func (c *Startd) Release(ctx context.Context, req *ReleaseRequest) error {
	return c.c.Call(ctx, pathRelease, req, nil)
}

// Vacate stops the job running under a claim.
func (c *Startd) Vacate(ctx context.Context, req *VacateRequest) error {
	return c.c.Call(ctx, pathVacate, req, nil)
}

// ClaimInfo asks whether a claim exists and runs a job.
func (c *Startd) ClaimInfo(ctx context.Context, req *ClaimInfoRequest) (*ClaimInfoResponse, error) {
	var resp ClaimInfoResponse
	if err := c.c.Call(ctx, pathStartdClaimInfo, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Quarantine asks about the machine's quarantine, and lifts it with
// req.Lift.
func (c *Startd) Quarantine(ctx context.Context, req *QuarantineRequest) (*QuarantineResponse, error) {
	var resp QuarantineResponse
	if err := c.c.Call(ctx, pathQuarantine, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Drain drains the machine, or with req.Cancel ends its drain.
func (c *Startd) Drain(ctx context.Context, req *DrainRequest) (*DrainResponse, error) {
	var resp DrainResponse
	if err := c.c.Call(ctx, pathDrain, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}
