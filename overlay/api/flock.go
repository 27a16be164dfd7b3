package api

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
)

// Paths of a central manager's flocking.
const (
	// PathFlock shows the pool's announcement, its flocks and the pools
	// willing to take its jobs, nearest first (GET).
	PathFlock = "/v1/flock"
	// PathFlocks is where each flock is set (PUT PathFlocks+NAME, a
	// FlockConfig) and removed (DELETE).
	PathFlocks = "/v1/flock/"
)

// Flock shows the flocking of a central manager's agent.
func (c *Client) Flock(ctx context.Context) (*FlockStatus, error) {
	var out FlockStatus
	if err := c.call(ctx, DefaultTimeout, http.MethodGet, PathFlock, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetFlock adds or replaces the flock cfg.Name on a central manager's
// agent and returns its flocking then.
func (c *Client) SetFlock(ctx context.Context, cfg FlockConfig) (*FlockStatus, error) {
	var out FlockStatus
	if err := c.call(ctx, DefaultTimeout, http.MethodPut, PathFlocks+url.PathEscape(cfg.Name), cfg, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RemoveFlock removes the flock name from a central manager's agent; its
// pool stops flocking through it, and jobs that run meanwhile finish.
func (c *Client) RemoveFlock(ctx context.Context, name string) error {
	return c.call(ctx, DefaultTimeout, http.MethodDelete, PathFlocks+url.PathEscape(name), nil, nil)
}

// FlockConfig is one flock as a central manager's agent keeps it (PUT
// /v1/flock/NAME). The pool is a source of the flock, a destination, or
// both: Out says where its jobs may go, In which pools may send
// theirs.
type FlockConfig struct {
	// Name is the flock's name: the resource's address, or any name.
	Name string `json:"name"`
	// Out, when set, lets the pool's jobs flock out.
	Out *FlockOut `json:"out,omitempty"`
	// In, when set, names the pools that may flock in through this
	// flock. A pool that is the destination of any flock accepts only
	// the pools its flocks name; one that is the destination of none
	// accepts any pool of the sea.
	In *FlockIn `json:"in,omitempty"`
}

// FlockOut is where a pool's jobs may flock.
type FlockOut struct {
	// To lists the destination pools, each by its central manager's API
	// address (its -pool address) or its pool name; empty, any pool of
	// the sea whose announcement the expressions allow.
	To []string `json:"to,omitempty"`
	// Allow, when set, must be true of a pool's announcement (Ad);
	// Deny, when true of it, excludes the pool.
	Allow string `json:"allow,omitempty"`
	Deny  string `json:"deny,omitempty"`
	// JobRequirements, when set, must be true of a job (MY) for it to
	// flock, as HTCondor's per-job FlockTo opt-in.
	JobRequirements string `json:"job_requirements,omitempty"`
	// MaxJobs bounds how many of the pool's jobs run in each destination
	// pool at once; 0 is no bound.
	MaxJobs int `json:"max_jobs,omitempty"`
}

// FlockIn names the pools that may flock in.
type FlockIn struct {
	From []string `json:"from"`
}

// FlockCandidate is a pool willing to take a pool's jobs.
type FlockCandidate struct {
	FlockAnnouncement
	// RTT is the estimated round trip to the pool's central manager;
	// RTTKnown is false when serf has no coordinate for one of the ends.
	RTT      time.Duration `json:"rtt"`
	RTTKnown bool          `json:"rtt_known"`
	// Flocks names the flocks that admit the pool, JobRequirements the
	// job expressions of those flocks (a job flocks there if one of them
	// holds, or if one of them has none), and MaxJobs the largest bound
	// (0: none).
	Flocks          []string `json:"flocks"`
	JobRequirements []string `json:"job_requirements,omitempty"`
	MaxJobs         int      `json:"max_jobs,omitempty"`
	// AnyJob is true when a flock that admits the pool has no job
	// expression.
	AnyJob bool `json:"any_job,omitempty"`
}

// FlockCapacity summarises a pool's spare capacity: how many slots are idle
// (unclaimed), and the resources of the largest of them.
type FlockCapacity struct {
	IdleSlots int `json:"idle_slots"`
	Cpus      int `json:"cpus"`
	Memory    int `json:"memory"` // MiB
	Gpus      int `json:"gpus"`
}

// FlockAnnouncement is what a central manager's agent says of its pool.
type FlockAnnouncement struct {
	Pool string `json:"pool"`
	// Node is the central manager's node name; API its -pool address.
	Node string `json:"node"`
	API  string `json:"api"`
	FlockCapacity
	// Expires is when the announcement stops counting unless renewed.
	Expires time.Time `json:"expires"`
	// Accept lists the pools that may flock to this one; nil means any.
	Accept []string `json:"accept,omitempty"`
	// Epoch is the epoch the announcing node acts at as its pool's
	// central manager when the pool keeps replicas of it (the member's
	// epoch tag, overlay/failover); 0 when it shows none.
	Epoch int64 `json:"epoch,omitempty"`
}

// Accepts says whether pool may flock to the announcing pool.
func (a FlockAnnouncement) Accepts(pool string) bool {
	if a.Accept == nil {
		return true
	}
	for _, p := range a.Accept {
		if strings.EqualFold(p, pool) {
			return true
		}
	}
	return false
}

// Ad is the announcement as the ClassAd a flock's allow and deny
// expressions are evaluated against: PoolName, Name (the central
// manager's node), PondAPI, IdleSlots, Cpus, Memory, Gpus, and RTT (the
// estimated round trip to the pool, in seconds; undefined when unknown).
func (a FlockAnnouncement) Ad(rtt time.Duration, known bool) *classad.Ad {
	ad := classad.NewAd()
	ad.SetString("MyType", "FlockPool")
	ad.SetString("PoolName", a.Pool)
	ad.SetString("Name", a.Node)
	ad.SetString("PondAPI", a.API)
	ad.SetInt("IdleSlots", int64(a.IdleSlots))
	ad.SetInt("Cpus", int64(a.Cpus))
	ad.SetInt("Memory", int64(a.Memory))
	ad.SetInt("Gpus", int64(a.Gpus))
	if known {
		ad.SetReal("RTT", rtt.Seconds())
	}
	return ad
}

// FlockStatus is what GET /v1/flock shows of a central manager's flocking.
type FlockStatus struct {
	Pool string `json:"pool"`
	Node string `json:"node"`
	// Announcement is the pool's own latest announcement.
	Announcement FlockAnnouncement `json:"announcement"`
	// Flocks are the flocks the pool takes part in.
	Flocks []FlockConfig `json:"flocks"`
	// Willing lists the pools willing to take the pool's jobs, nearest
	// first.
	Willing []FlockCandidate `json:"willing"`
	// Admitted is Willing with the pools that have no idle slot now,
	// which the pool's schedds keep flocking to while they run their
	// jobs: what the schedds of the pool's other nodes flock by.
	Admitted []FlockCandidate `json:"admitted,omitempty"`
	// Sea lists every unexpired announcement the node sees.
	Sea []FlockAnnouncement `json:"sea"`
}
