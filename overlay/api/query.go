package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/ring"
)

// Mode says which matches a query wants.
type Mode uint8

const (
	// BestRank returns the k matching nodes with the highest Rank.
	BestRank Mode = iota
	// FirstFit returns any k matching nodes, as soon as they are found.
	FirstFit
)

// String returns "best-rank" or "first-fit".
func (m Mode) String() string {
	switch m {
	case BestRank:
		return "best-rank"
	case FirstFit:
		return "first-fit"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode parses "best-rank" or "first-fit".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "best-rank", "":
		return BestRank, nil
	case "first-fit":
		return FirstFit, nil
	}
	return 0, fmt.Errorf("query mode %q: want best-rank or first-fit", s)
}

// MarshalText implements encoding.TextMarshaler.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Query is a PonD tree query: the body of POST /v1/query, run with the
// agent as the root of the tree (overlay/tree).
type Query struct {
	// ID identifies the query; Engine.Start fills in a fresh one if empty.
	ID string `json:"id"`
	// Requirements and Rank are ClassAd expressions, carried unchanged to
	// every node's Evaluator.
	Requirements string `json:"requirements,omitempty"`
	Rank         string `json:"rank,omitempty"`
	// K is how many matches to return; K <= 0 returns every match.
	K int `json:"k"`
	// Mode is BestRank or FirstFit.
	Mode Mode `json:"mode"`
	// Attrs names the machine-ad attributes each match reports.
	Attrs []string `json:"attrs,omitempty"`
	// Deadline is when the root must have its answer. Nodes assume
	// loosely synchronised clocks.
	Deadline time.Time `json:"deadline"`
	// Redundant runs the clockwise and counter-clockwise trees at once.
	Redundant bool `json:"redundant,omitempty"`
}

// Match is one matching node of an answer.
type Match struct {
	Name  string         `json:"name"`
	Addr  string         `json:"addr,omitempty"`
	Rank  float64        `json:"rank"`
	Attrs map[string]any `json:"attrs,omitempty"`
}

// QueryStats describes how a tree query ran.
type QueryStats struct {
	// Visited counts node evaluations (a node on both redundant trees
	// counts twice).
	Visited int `json:"visited"`
	// Messages counts requests and answers sent.
	Messages int `json:"messages"`
	// Depth is the longest root-to-leaf path in hops.
	Depth int `json:"depth"`
	// Rounds counts the rounds of growing depth a first-fit query took.
	Rounds int `json:"rounds"`
	// Latency is the time from start to answer.
	Latency time.Duration `json:"latency"`
	// Members is the size of the root's membership view and Covered how
	// many of those members lie in the covered regions.
	Members int `json:"members"`
	Covered int `json:"covered"`
	// Completeness is Covered/Members and RingCoverage the covered
	// fraction of the identifier ring.
	Completeness float64 `json:"completeness"`
	RingCoverage float64 `json:"ring_coverage"`
	// Missing lists the ring intervals no answer spoke for, and
	// MissingMembers (at most 64) the members in them.
	Missing        []ring.Interval `json:"missing,omitempty"`
	MissingMembers []string        `json:"missing_members,omitempty"`
}

// Answer is what a tree query returns at its root: the best matches,
// statistics and the coverage the answer speaks for.
type Answer struct {
	Query   Query      `json:"query"`
	Matches []Match    `json:"matches"`
	Stats   QueryStats `json:"stats"`
}

// String summarises the answer on one line.
func (a *Answer) String() string {
	b, _ := json.Marshal(a.Stats)
	return fmt.Sprintf("%d matches %s", len(a.Matches), b)
}

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
