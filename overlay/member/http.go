package member

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/pond-htc/pond/overlay/internal/jsonhttp"
)

// Handler serves the membership API: GET /v1/pond, POST /v1/pond/invite,
// POST /v1/pond/release. Mount it on the agent's API mux.
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/pond", func(w http.ResponseWriter, r *http.Request) {
		jsonhttp.Write(w, http.StatusOK, map[string]any{"node": m.opts.Name, "membership": m.Current()})
	})
	mux.HandleFunc("POST /v1/pond/invite", func(w http.ResponseWriter, r *http.Request) {
		var inv Invitation
		if err := jsonhttp.Decode(r, &inv); err != nil {
			jsonhttp.Error(w, http.StatusBadRequest, "invalid invitation: "+err.Error())
			return
		}
		reply, err := m.Invite(r.Context(), inv)
		if err != nil {
			jsonhttp.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		jsonhttp.Write(w, http.StatusOK, reply)
	})
	mux.HandleFunc("POST /v1/pond/release", func(w http.ResponseWriter, r *http.Request) {
		var req releaseRequest
		if err := jsonhttp.Decode(r, &req); err != nil {
			jsonhttp.Error(w, http.StatusBadRequest, "invalid release: "+err.Error())
			return
		}
		res, err := m.Release(r.Context(), req.PondID, "released", req.Drain)
		var bad *DrainModeError
		switch {
		case errors.As(err, &bad):
			jsonhttp.Error(w, http.StatusBadRequest, err.Error())
			return
		case err != nil:
			jsonhttp.Error(w, http.StatusInternalServerError, err.Error())
			return
		}
		jsonhttp.Write(w, http.StatusOK, res)
	})
	return mux
}

type releaseRequest struct {
	PondID string `json:"pond_id"`
	Drain  Drain  `json:"drain"`
}

// Client talks to a node's membership API.
type Client struct {
	addr string
	hc   *http.Client
	// long has no timeout of its own: a release lasts as long as its drain.
	long *http.Client
}

// NewClient returns a client for the agent API at addr (host:port).
func NewClient(addr string) *Client {
	return &Client{addr: addr, hc: &http.Client{Timeout: 10 * time.Second}, long: &http.Client{}}
}

func (c *Client) post(ctx context.Context, path string, body, out any) error {
	return jsonhttp.Do(ctx, c.hc, http.MethodPost, c.addr, path, body, out)
}

// Invite sends an invitation.
func (c *Client) Invite(ctx context.Context, inv Invitation) (Reply, error) {
	var r Reply
	err := c.post(ctx, "/v1/pond/invite", inv, &r)
	return r, err
}

// Release asks the node to leave the pond pondID, draining first as d
// says; it returns when the node has left, or has refused. The call is
// bounded by the drain's timeout plus half a minute, and by ctx.
func (c *Client) Release(ctx context.Context, pondID string, d Drain) (ReleaseResult, error) {
	ctx, cancel := context.WithTimeout(ctx, d.Limit()+30*time.Second)
	defer cancel()
	var r ReleaseResult
	err := jsonhttp.Do(ctx, c.long, http.MethodPost, c.addr, "/v1/pond/release", releaseRequest{PondID: pondID, Drain: d}, &r)
	return r, err
}

// Current returns the node's membership, or nil when it is free.
func (c *Client) Current(ctx context.Context) (*Membership, error) {
	var r struct {
		Membership *Membership `json:"membership"`
	}
	err := jsonhttp.Do(ctx, c.hc, http.MethodGet, c.addr, "/v1/pond", nil, &r)
	return r.Membership, err
}
