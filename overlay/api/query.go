package api

import (
	"fmt"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/tree"
)

// Query is a PonD tree query: the body of POST /v1/query, run with the
// agent as the root of the tree.
type Query = tree.Query

// Answer is what a tree query returns: the best matches, statistics and the
// coverage the answer speaks for.
type Answer = tree.Answer

// Match is one matching node of an answer.
type Match = tree.Match

// Mode says which matches a query wants: BestRank or FirstFit.
type Mode = tree.Mode

// Query modes.
const (
	BestRank = tree.BestRank
	FirstFit = tree.FirstFit
)

// ParseMode parses "best-rank" or "first-fit".
func ParseMode(s string) (Mode, error) { return tree.ParseMode(s) }

// DefaultQueryTimeout is a query's deadline when the request gives none.
const DefaultQueryTimeout = 5 * time.Second

// ValidateQuery checks that a query's expressions parse, so that a bad query
// is refused before it travels.
func ValidateQuery(q *Query) error {
	if q.Requirements != "" {
		if _, err := classad.ParseExpr(q.Requirements); err != nil {
			return fmt.Errorf("requirements: %w", err)
		}
	}
	if q.Rank != "" {
		if _, err := classad.ParseExpr(q.Rank); err != nil {
			return fmt.Errorf("rank: %w", err)
		}
	}
	return nil
}

// MatchRequest is the body of POST /v1/match: run a pond-match serf query
// from the agent and keep the best K matches by rank. It is the flat
// alternative to a tree query: serf gossips the query to every member and
// every member answers the origin directly.
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
	Matches []Match `json:"matches"`
	// Members is how many alive pond members the origin expected to
	// answer, Replies how many did.
	Members int `json:"members"`
	Replies int `json:"replies"`
	// Complete is true when every expected member answered before the
	// timeout; the query then ends early.
	Complete bool          `json:"complete"`
	Latency  time.Duration `json:"latency"`
}
