package pondnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Handler serves the membership API: GET /v1/pond, POST /v1/pond/invite,
// POST /v1/pond/release. Mount it on the agent's API mux.
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/pond", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"node": m.opts.Name, "membership": m.Current()})
	})
	mux.HandleFunc("POST /v1/pond/invite", func(w http.ResponseWriter, r *http.Request) {
		var inv Invitation
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&inv); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid invitation: " + err.Error()})
			return
		}
		reply, err := m.Invite(r.Context(), inv)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, reply)
	})
	mux.HandleFunc("POST /v1/pond/release", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			PondID string `json:"pond_id"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid release: " + err.Error()})
			return
		}
		was, err := m.Release(r.Context(), req.PondID, "released")
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"node": m.opts.Name, "released": was})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Client talks to a node's membership API.
type Client struct {
	addr string
	hc   *http.Client
}

// NewClient returns a client for the agent API at addr (host:port).
func NewClient(addr string) *Client {
	return &Client{addr: addr, hc: &http.Client{Timeout: 10 * time.Second}}
}

func (c *Client) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.addr+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", c.addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", c.addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s: %s", c.addr, e.Error)
		}
		return fmt.Errorf("%s: %s", c.addr, resp.Status)
	}
	return json.Unmarshal(data, out)
}

// Invite sends an invitation.
func (c *Client) Invite(ctx context.Context, inv Invitation) (Reply, error) {
	var r Reply
	err := c.post(ctx, "/v1/pond/invite", inv, &r)
	return r, err
}

// Release asks the node to leave the pond pondID.
func (c *Client) Release(ctx context.Context, pondID string) (bool, error) {
	var r struct {
		Released bool `json:"released"`
	}
	err := c.post(ctx, "/v1/pond/release", map[string]string{"pond_id": pondID}, &r)
	return r.Released, err
}

// Current returns the node's membership, or nil when it is free.
func (c *Client) Current(ctx context.Context) (*Membership, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.addr+"/v1/pond", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.addr, err)
	}
	defer resp.Body.Close()
	var r struct {
		Membership *Membership `json:"membership"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", c.addr, err)
	}
	return r.Membership, nil
}
