package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/pond-htc/pond/overlay/api"
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

// serveMatchQueries answers pond-match serf queries with the agent's
// evaluator until the services stop.
func (a *Agent) serveMatchQueries() {
	events := a.sea.Subscribe(256)
	for {
		select {
		case <-a.ctx.Done():
			return
		case e := <-events:
			if q, ok := e.(*serf.Query); ok && q.Name == MatchQueryName {
				a.answerMatch(a.ctx, q)
			}
		}
	}
}

func (a *Agent) answerMatch(ctx context.Context, q *serf.Query) {
	var mq MatchQuery
	reply := MatchReply{Name: a.cfg.Name}
	if err := json.Unmarshal(q.Payload, &mq); err != nil {
		reply.Error = "payload: " + err.Error()
	} else {
		res, ok, err := a.eval.Match(ctx, &api.Query{Requirements: mq.Requirements, Rank: mq.Rank})
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
func (a *Agent) Match(ctx context.Context, req api.MatchRequest) (*api.MatchAnswer, error) {
	payload, err := json.Marshal(MatchQuery{Requirements: req.Requirements, Rank: req.Rank})
	if err != nil {
		return nil, err
	}
	members := 0
	for _, m := range a.sea.Members() {
		if m.Status == api.StatusAlive && m.IsPond() {
			members++
		}
	}
	start := time.Now()
	resp, err := a.sea.Serf().Query(MatchQueryName, payload, &serf.QueryParam{Timeout: req.Timeout})
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
			var mr MatchReply
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
