// Package match is the flat alternative to a tree query: a pond-match serf
// query that every member of the sea answers, from its own machine ad, to
// the node that asked. It answers those queries on a node, runs them from
// it, and serves the route that runs them (POST /v1/match).
package match

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/query"
	"github.com/pond-htc/pond/overlay/tree"
)

// QueryName is the name of the serf query with which an agent asks
// every member of the sea to match a job's Requirements and Rank against its
// own machine ad. It is the flat alternative to a tree query: serf gossips
// the query to every member and every member answers the origin directly.
const QueryName = "pond-match"

// Query is the payload of a pond-match serf query. Serf caps a query
// message (payload and header) at 1 KiB, so the expressions must be short.
type Query struct {
	Requirements string `json:"q,omitempty"`
	Rank         string `json:"r,omitempty"`
}

// Reply is a member's answer to a pond-match query. Every member
// answers, matching or not, so that the origin knows when it has heard from
// the whole sea instead of waiting for the query's timeout. Serf caps a
// reply at 1 KiB.
type Reply struct {
	Name  string  `json:"n"`
	Match bool    `json:"m,omitempty"`
	Rank  float64 `json:"k,omitempty"`
	Error string  `json:"e,omitempty"`
}

// Sea is the node's membership in the sea as pond-match queries use it
// (gossip.Sea).
type Sea interface {
	// Subscribe returns a channel of the sea's events, buffered by buf.
	Subscribe(buf int) <-chan serf.Event
	// Members returns the sea's members.
	Members() []api.Member
	// Serf is the running serf instance queries are sent from.
	Serf() *serf.Serf
}

// Serve answers pond-match serf queries, as the node name, with eval until
// ctx ends.
func Serve(ctx context.Context, sea Sea, name string, eval *query.Evaluator, logger *slog.Logger) {
	events := sea.Subscribe(256)
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-events:
			if q, ok := e.(*serf.Query); ok && q.Name == QueryName {
				answer(ctx, q, name, eval, logger)
			}
		}
	}
}

func answer(ctx context.Context, q *serf.Query, name string, eval *query.Evaluator, logger *slog.Logger) {
	var mq Query
	reply := Reply{Name: name}
	if err := json.Unmarshal(q.Payload, &mq); err != nil {
		reply.Error = "payload: " + err.Error()
	} else {
		res, ok, err := eval.Match(ctx, &api.Query{Requirements: mq.Requirements, Rank: mq.Rank})
		switch {
		case err != nil:
			reply.Error = err.Error()
		case ok:
			reply.Match, reply.Rank = true, res.Rank
		}
	}
	data, err := json.Marshal(reply)
	if err == nil {
		err = q.Respond(data)
	}
	if err != nil {
		logger.Debug("answering a pond-match query", "err", err)
	}
}

// Run runs a pond-match serf query from this node and returns the best
// K matches, ordered by rank (highest first) then name. It returns once
// every alive pond member has answered, or at the query's timeout.
func Run(ctx context.Context, sea Sea, req api.MatchRequest) (*api.MatchAnswer, error) {
	payload, err := json.Marshal(Query{Requirements: req.Requirements, Rank: req.Rank})
	if err != nil {
		return nil, err
	}
	members := 0
	for _, m := range sea.Members() {
		if m.Status == api.StatusAlive && m.IsPond() {
			members++
		}
	}
	start := time.Now()
	resp, err := sea.Serf().Query(QueryName, payload, &serf.QueryParam{Timeout: req.Timeout})
	if err != nil {
		return nil, fmt.Errorf("pond-match query: %w", err)
	}
	defer resp.Close()
	ans := &api.MatchAnswer{Members: members, Matches: []api.Match{}}
	seen := map[string]bool{}
collect:
	for ans.Replies < members {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pond-match query: %w", ctx.Err())
		case r, ok := <-resp.ResponseCh():
			if !ok {
				// The query's timeout: what came in is the answer.
				break collect
			}
			var mr Reply
			if err := json.Unmarshal(r.Payload, &mr); err != nil || seen[r.From] {
				continue
			}
			seen[r.From] = true
			ans.Replies++
			if mr.Match {
				ans.Matches = append(ans.Matches, api.Match{Name: r.From, Rank: mr.Rank})
				// Keep the list short while collecting.
				if req.K > 0 && len(ans.Matches) > 4*req.K {
					ans.Matches = tree.TopK(ans.Matches, req.K)
				}
			}
		}
	}
	ans.Complete = ans.Replies == members
	ans.Latency = time.Since(start)
	ans.Matches = tree.TopK(ans.Matches, req.K)
	return ans, nil
}

// Handler serves POST /v1/match: it runs a pond-match query from this node
// (Run) and answers with its matches.
func Handler(sea Sea) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req api.MatchRequest
		if err := wire.ReadJSON(r, &req); err != nil {
			wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("body: %v", err))
			return
		}
		if req.Timeout < 0 {
			wire.WriteError(w, http.StatusBadRequest, errors.New("timeout: must not be negative"))
			return
		}
		if err := api.ValidateQuery(&api.Query{Requirements: req.Requirements, Rank: req.Rank}); err != nil {
			wire.WriteError(w, http.StatusBadRequest, err)
			return
		}
		ans, err := Run(r.Context(), sea, req)
		if err != nil {
			wire.WriteError(w, http.StatusBadGateway, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, ans)
	}
}
