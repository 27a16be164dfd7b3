package api

import "time"

// TagGlidein is the serf tag of an agent that runs as a glidein: its
// glidein ID (see overlay/glidein). Other agents have no such tag.
const TagGlidein = "glidein"

// GlideinStatus is where a glidein is in its life: GET /v1/self shows it
// (Self.Glidein), and the glidein writes it as JSON to its status file
// (glidein.status in its data directory by default) at every change of
// phase, last when it has ended, for the site or factory that started it.
type GlideinStatus struct {
	// ID is the glidein's ID, given with -glidein.
	ID string `json:"id"`
	// Name is the node's name in the sea.
	Name string `json:"name"`
	// Phase is validating, failed, running, draining or ended (the
	// Phase* constants of overlay/glidein).
	Phase string `json:"phase"`
	// Reason says why the glidein is draining, ended or failed: validation,
	// idle, lifetime, end-time, central-manager-gone, signal, leave or
	// error (the Reason* constants of overlay/glidein); "" while it
	// validates or runs.
	Reason string `json:"reason,omitempty"`
	// Message says it in words, with what a failed check printed.
	Message string `json:"message,omitempty"`
	// PID is the agent's process.
	PID int `json:"pid"`
	// Started is when the agent started; Updated when the status was
	// written.
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	// EndTime is when the glidein must be gone (its lifetime or its batch
	// job's end, whichever is sooner), and DrainAt when it starts
	// draining for it; zero when it has no end.
	EndTime time.Time `json:"end_time,omitzero"`
	DrainAt time.Time `json:"drain_at,omitzero"`
	// IdleTimeout and CMTimeout are the glidein's limits (0: none).
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	CMTimeout   time.Duration `json:"cm_timeout,omitempty"`
	// MaxJobs is the most jobs the glidein runs (0: no limit).
	MaxJobs int `json:"max_jobs,omitempty"`
	// IdleSince is when its slots were last all unclaimed, zero while one
	// is claimed.
	IdleSince time.Time `json:"idle_since,omitzero"`
	// CentralManager is the API address of the glidein's central manager,
	// and CMLastSeen when it last answered an authenticated call.
	CentralManager string    `json:"central_manager,omitempty"`
	CMLastSeen     time.Time `json:"cm_last_seen,omitzero"`
	// Checks are the validation's results, in the order of the checks.
	Checks []GlideinCheck `json:"checks,omitempty"`
	// Drain is what the drain before leaving did.
	Drain *DrainResult `json:"drain,omitempty"`
	// ExitCode is the agent's exit code, once the phase is failed or
	// ended: 0 when it ran itself down, ExitValidation of overlay/glidein
	// (3) when validation failed, 1 on an error.
	ExitCode *int `json:"exit_code,omitempty"`
}

// GlideinCheck is the result of one validation check of a glidein.
type GlideinCheck struct {
	// Name names the check: its name in the validation file, or its type.
	Name string `json:"name"`
	// OK says whether it passed.
	OK bool `json:"ok"`
	// Detail says what was found, or why it failed (with the output of a
	// failed command).
	Detail string `json:"detail,omitempty"`
	// Took is how long it ran.
	Took time.Duration `json:"took"`
}
