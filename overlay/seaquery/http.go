package seaquery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/pond-htc/pond/overlay/tree"
)

// Runner starts a query at this node as the root of the tree.
type Runner interface {
	Query(ctx context.Context, q tree.Query) (*tree.Answer, error)
}

// DefaultTimeout is a query's deadline when the request gives none.
const DefaultTimeout = 5 * time.Second

// Handler serves POST /v1/query: the body is a tree.Query (a zero deadline
// means DefaultTimeout from now), the answer a tree.Answer.
func Handler(r Runner) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/query", func(w http.ResponseWriter, req *http.Request) {
		var q tree.Query
		if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&q); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid query: " + err.Error()})
			return
		}
		if err := Validate(&q); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		if q.Deadline.IsZero() {
			q.Deadline = time.Now().Add(DefaultTimeout)
		}
		ctx, cancel := context.WithDeadline(req.Context(), q.Deadline.Add(time.Second))
		defer cancel()
		ans, err := r.Query(ctx, q)
		if err != nil {
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, ans)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Client asks an agent to run tree queries.
type Client struct {
	addr string
	hc   *http.Client
}

// NewClient returns a client for the agent API at addr (host:port).
func NewClient(addr string) *Client {
	return &Client{addr: addr, hc: &http.Client{}}
}

// Query runs q with the agent as root. A zero q.Deadline means
// DefaultTimeout from now.
func (c *Client) Query(ctx context.Context, q tree.Query) (*tree.Answer, error) {
	if q.Deadline.IsZero() {
		q.Deadline = time.Now().Add(DefaultTimeout)
	}
	body, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(ctx, q.Deadline.Add(5*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.addr+"/v1/query", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query at %s: %w", c.addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("query at %s: %w", c.addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("query at %s: %s", c.addr, e.Error)
		}
		if resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("query at %s: this agent does not serve tree queries", c.addr)
		}
		return nil, fmt.Errorf("query at %s: %s", c.addr, resp.Status)
	}
	var ans tree.Answer
	if err := json.Unmarshal(data, &ans); err != nil {
		return nil, fmt.Errorf("query at %s: %w", c.addr, err)
	}
	return &ans, nil
}
