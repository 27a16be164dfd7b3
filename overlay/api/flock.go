package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/pond-htc/pond/overlay/flock"
)

// Paths of a central manager's flocking.
const (
	// PathFlock shows the pool's announcement, its flocks and the pools
	// willing to take its jobs, nearest first (GET).
	PathFlock = "/v1/flock"
	// PathFlocks is where each flock is set (PUT PathFlocks+NAME, a
	// flock.Config) and removed (DELETE).
	PathFlocks = "/v1/flock/"
)

// FlockStatus is what GET /v1/flock answers.
type FlockStatus = flock.Status

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
func (c *Client) SetFlock(ctx context.Context, cfg flock.Config) (*FlockStatus, error) {
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
