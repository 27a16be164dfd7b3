package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/seaquery"
	"github.com/pond-htc/pond/overlay/tree"
)

// MatchQueryName is the name of the serf query with which an agent asks
// every member of the sea to match a job's Requirements and Rank against its
// own machine ad. It is the flat alternative to a tree query: serf gossips
// the query to every member and every member answers the origin directly.
const MatchQueryName = "pond-match"

// MatchQuery is the payload of a pond-match serf query. Serf caps a query
// message (payload and header) at 1 KiB, so the expressions must be short.
type MatchQuery struct {
	Requirements string `json:"q,omitempty"`
	Rank         string `json:"r,omitempty"`
}

// MatchReply is a member's answer to a pond-match query. Every member
// answers, matching or not, so that the origin knows when it has heard from
// the whole sea instead of waiting for the query's timeout. Serf caps a
// reply at 1 KiB.
type MatchReply struct {
	Name  string  `json:"n"`
	Match bool    `json:"m,omitempty"`
	Rank  float64 `json:"k,omitempty"`
	Error string  `json:"e,omitempty"`
}

// MatchRequest is the body of POST /v1/match: run a pond-match serf query
// from this agent and keep the best K matches by rank.
type MatchRequest struct {
	Requirements string `json:"requirements,omitempty"`
	Rank         string `json:"rank,omitempty"`
	// K is how many matches to keep; K <= 0 keeps every match.
	K int `json:"k"`
	// Timeout is the serf query's timeout; zero means serf's default
	// (gossip interval x 16 x log10(N+1)).
	Timeout time.Duration `json:"timeout,omitempty"`
}

// MatchAnswer is what POST /v1/match returns.
type MatchAnswer struct {
	Matches []tree.Match `json:"matches"`
	// Members is how many alive pond members the origin expected to
	// answer, Replies how many did.
	Members int `json:"members"`
	Replies int `json:"replies"`
	// Complete is true when every expected member answered before the
	// timeout; the query then ends early.
	Complete bool          `json:"complete"`
	Latency  time.Duration `json:"latency"`
}

// ServeMatchQueries answers pond-match serf queries with ev, which matches
// a query against this node's machine ad, until ctx is done.
func (a *Agent) ServeMatchQueries(ctx context.Context, ev tree.Evaluator) {
	events := a.sea.Subscribe(256)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-events:
				q, ok := e.(*serf.Query)
				if !ok || q.Name != MatchQueryName {
					continue
				}
				a.answerMatch(ctx, q, ev)
			}
		}
	}()
	a.mux.HandleFunc("POST /v1/match", a.handleMatch)
}

func (a *Agent) answerMatch(ctx context.Context, q *serf.Query, ev tree.Evaluator) {
	var mq MatchQuery
	reply := MatchReply{Name: a.cfg.Name}
	if err := json.Unmarshal(q.Payload, &mq); err != nil {
		reply.Error = "payload: " + err.Error()
	} else {
		res, ok, err := ev.Match(ctx, &tree.Query{Requirements: mq.Requirements, Rank: mq.Rank})
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
		a.logger.Debug("answering a pond-match query", "err", err)
	}
}

// Match runs a pond-match serf query from this agent and returns the best
// K matches, ordered by rank (highest first) then name. It returns once
// every alive pond member has answered, or at the query's timeout.
func (a *Agent) Match(ctx context.Context, req MatchRequest) (*MatchAnswer, error) {
	payload, err := json.Marshal(MatchQuery{Requirements: req.Requirements, Rank: req.Rank})
	if err != nil {
		return nil, err
	}
	members := 0
	for _, m := range a.sea.Members() {
		if m.Status == gossip.StatusAlive && m.IsPond() {
			members++
		}
	}
	start := time.Now()
	resp, err := a.sea.Serf().Query(MatchQueryName, payload, &serf.QueryParam{Timeout: req.Timeout})
	if err != nil {
		return nil, fmt.Errorf("pond-match query: %w", err)
	}
	defer resp.Close()
	ans := &MatchAnswer{Members: members, Matches: []tree.Match{}}
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
			var mr MatchReply
			if err := json.Unmarshal(r.Payload, &mr); err != nil || seen[r.From] {
				continue
			}
			seen[r.From] = true
			ans.Replies++
			if mr.Match {
				ans.Matches = append(ans.Matches, tree.Match{Name: r.From, Rank: mr.Rank})
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

func (a *Agent) handleMatch(w http.ResponseWriter, r *http.Request) {
	var req MatchRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{fmt.Sprintf("body: %v", err)})
		return
	}
	if req.Timeout < 0 {
		writeJSON(w, http.StatusBadRequest, apiError{"timeout: must not be negative"})
		return
	}
	if err := seaquery.Validate(&tree.Query{Requirements: req.Requirements, Rank: req.Rank}); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
		return
	}
	ans, err := a.Match(r.Context(), req)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, apiError{err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, ans)
}
