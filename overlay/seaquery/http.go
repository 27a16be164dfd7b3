package seaquery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/pond-htc/pond/overlay/internal/jsonhttp"

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
		if err := jsonhttp.Decode(req, &q); err != nil {
			jsonhttp.Error(w, http.StatusBadRequest, "invalid query: "+err.Error())
			return
		}
		if err := Validate(&q); err != nil {
			jsonhttp.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		if q.Deadline.IsZero() {
			q.Deadline = time.Now().Add(DefaultTimeout)
		}
		ctx, cancel := context.WithDeadline(req.Context(), q.Deadline.Add(time.Second))
		defer cancel()
		ans, err := r.Query(ctx, q)
		if err != nil {
			jsonhttp.Error(w, http.StatusBadGateway, err.Error())
			return
		}
		jsonhttp.Write(w, http.StatusOK, ans)
	})
	return mux
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
	ctx, cancel := context.WithDeadline(ctx, q.Deadline.Add(5*time.Second))
	defer cancel()
	var ans tree.Answer
	if err := jsonhttp.Do(ctx, c.hc, http.MethodPost, c.addr, "/v1/query", q, &ans); err != nil {
		var se *jsonhttp.StatusError
		if errors.As(err, &se) && se.Code == http.StatusNotFound {
			return nil, fmt.Errorf("query at %s: this agent does not serve tree queries", c.addr)
		}
		return nil, fmt.Errorf("query at %w", err)
	}
	return &ans, nil
}
