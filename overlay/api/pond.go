package api

import (
	"fmt"
	"time"
)

// Invitation asks a node to join a pond (POST /v1/pond/invite).
type Invitation struct {
	// Pond is the pond's name; PondID identifies one pond instance, so that
	// two ponds of the same name (two working directories) never share a
	// node.
	Pond   string `json:"pond"`
	PondID string `json:"pond_id"`
	// CentralManager is the API address the node's CONDOR_HOST is set to.
	CentralManager string `json:"central_manager"`
	// Lease is how long the membership lasts unless renewed; zero means
	// until released.
	Lease time.Duration `json:"lease"`
	// Attributes are stamped into the node's machine ad while it is a
	// member (PondName is always stamped).
	Attributes map[string]string `json:"attributes,omitempty"`
	// JobIDs are the jobs that caused the pond, as in PonD's rule that one
	// pond serves several distinct jobs.
	JobIDs []string `json:"job_ids,omitempty"`
}

// Membership is the pond a node belongs to.
type Membership struct {
	Invitation
	Since time.Time `json:"since"`
	// Expires is zero when the lease does not expire.
	Expires time.Time `json:"expires"`
}

// MembershipStatus is what GET /v1/pond returns.
type MembershipStatus struct {
	Node string `json:"node"`
	// Membership is nil when the node is free.
	Membership *Membership `json:"membership"`
}

// Reply answers an invitation.
type Reply struct {
	Node     string `json:"node"`
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
}

// Drain modes of a release.
const (
	// DrainWait lets running jobs finish (up to the drain timeout, then
	// evicts them); no new job starts.
	DrainWait = "wait"
	// DrainEvict stops running jobs at once; their schedd runs them
	// elsewhere.
	DrainEvict = "evict"
)

// DefaultDrainTimeout bounds a DrainWait release that names no timeout.
const DefaultDrainTimeout = 10 * time.Minute

// Drain says how a member empties itself before leaving its pond.
type Drain struct {
	// Mode is DrainWait (the default) or DrainEvict.
	Mode string `json:"mode,omitempty"`
	// Timeout bounds a DrainWait; DefaultDrainTimeout when zero.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Limit is how long a DrainWait may last: Timeout, or DefaultDrainTimeout.
func (d Drain) Limit() time.Duration {
	if d.Timeout <= 0 {
		return DefaultDrainTimeout
	}
	return d.Timeout
}

// DrainModeError is the error of a drain mode that is neither DrainWait
// nor DrainEvict.
type DrainModeError struct{ Mode string }

func (e *DrainModeError) Error() string {
	return fmt.Sprintf("drain mode %q: want %q or %q", e.Mode, DrainWait, DrainEvict)
}

// ParseDrainMode checks a drain mode; "" is DrainWait.
func ParseDrainMode(s string) (string, error) {
	switch s {
	case "", DrainWait:
		return DrainWait, nil
	case DrainEvict:
		return DrainEvict, nil
	}
	return "", &DrainModeError{Mode: s}
}

// DrainResult says what a member's drain did.
type DrainResult struct {
	// Finished is how many jobs ran to their end during the drain.
	Finished int `json:"finished"`
	// Evicted is how many jobs were stopped and handed back to their
	// schedd.
	Evicted int `json:"evicted"`
	// Took is how long the drain lasted.
	Took time.Duration `json:"took"`
}

// ReleaseRequest is the body of POST /v1/pond/release.
type ReleaseRequest struct {
	// PondID is the pond the node is asked to leave; empty means any.
	PondID string `json:"pond_id"`
	Drain  Drain  `json:"drain"`
}

// ReleaseResult answers a release.
type ReleaseResult struct {
	Node string `json:"node"`
	// Released is true when the node left the pond for this release.
	Released bool        `json:"released"`
	Drain    DrainResult `json:"drain"`
}
