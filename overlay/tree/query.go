// Package tree answers PonD-style tree queries over the sea.
//
// A query (ClassAd Requirements and Rank carried as strings, a result size
// k, a mode and a deadline) starts at any node, the root, which owns the
// whole identifier ring. A node that owns a region [begin, end) of the ring
// hands each member of its routing table that falls inside the region the
// sub-region from that member up to the next one, evaluates its own machine
// ad once, waits for its children until a deadline derived from its own,
// merges their answers keeping the best k, and answers its parent. With the
// power-of-two fingers of package ring the regions halve at each level, so
// the tree over N members is about log2(N) deep.
//
// Beyond the paper, every answer carries its coverage (the ring intervals
// it speaks for); a parent whose child fails or stays silent hands that
// child's region to the next member inside it, and the root reports the
// fraction of members covered and names the regions it could not reach.
// Redundant queries run a clockwise and a counter-clockwise tree at once and
// take the union.
//
// The Engine is written against four interfaces — Transport, Router, Clock
// and Evaluator — so that the node agent hosts it over TCP (TCPTransport,
// MemberRouter, RealClock, an Evaluator over its machine ad) and the
// simulator in overlay/sim drives the same code on simulated time.
package tree

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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

// Query is a tree query.
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

// Result is what an Evaluator reports for a matching node.
type Result struct {
	// Rank is the value of the query's Rank against the node's ad.
	Rank float64
	// Attrs holds the requested attributes the ad defines; values must
	// survive a JSON round trip (strings, numbers, booleans).
	Attrs map[string]any
}

// Evaluator matches a query against this node's own live machine ad.
type Evaluator interface {
	// Match reports whether the ad satisfies q.Requirements and, if so,
	// its Rank and requested attributes. An error counts as no match.
	Match(ctx context.Context, q *Query) (Result, bool, error)
}

// EvaluatorFunc adapts a function to Evaluator.
type EvaluatorFunc func(ctx context.Context, q *Query) (Result, bool, error)

// Match calls f.
func (f EvaluatorFunc) Match(ctx context.Context, q *Query) (Result, bool, error) { return f(ctx, q) }

// Match is one matching node in an answer.
type Match struct {
	Name  string         `json:"name"`
	Addr  string         `json:"addr,omitempty"`
	Rank  float64        `json:"rank"`
	Attrs map[string]any `json:"attrs,omitempty"`
}

// better reports whether a sorts before b: higher rank first, then name.
func better(a, b *Match) bool {
	if a.Rank != b.Rank {
		return a.Rank > b.Rank
	}
	return a.Name < b.Name
}

// Direction is the orientation of a tree.
type Direction uint8

const (
	// Clockwise trees split regions at clockwise positions.
	Clockwise Direction = iota
	// CounterClockwise trees work on the mirrored ring (positions ID.Not()).
	CounterClockwise
)

// pos returns the position of id in the direction's coordinates.
func (d Direction) pos(id ring.ID) ring.ID {
	if d == CounterClockwise {
		return id.Not()
	}
	return id
}

// toRing maps an interval in the direction's coordinates to the ring.
func (d Direction) toRing(iv ring.Interval) ring.Interval {
	if d == CounterClockwise {
		return iv.Mirror()
	}
	return iv
}

// Kind distinguishes requests.
type Kind uint8

const (
	// KindQuery asks the receiver to answer for Region.
	KindQuery Kind = iota
	// KindStop tells the receiver that its answer for Region is no longer
	// wanted (first-fit has its k matches).
	KindStop
	// KindAck tells the sender of a query request for Region that the
	// receiver has it and is at work (sent only if the request set Ack).
	KindAck
)

// Request is the message a parent sends a child.
type Request struct {
	Kind  Kind      `json:"kind,omitempty"`
	Query Query     `json:"query"`
	Dir   Direction `json:"dir,omitempty"`
	// Region is what the receiver answers for, in Dir's coordinates;
	// it starts at the receiver's own position.
	Region ring.Interval `json:"region"`
	// Deadline is when the sender needs the answer.
	Deadline time.Time `json:"deadline"`
	// Depth is the receiver's distance from the root.
	Depth int    `json:"depth"`
	From  string `json:"from,omitempty"`
	// Round numbers the rounds of a first-fit query; MaxDepth, if
	// positive, is the depth at which the round stops spreading.
	Round    int `json:"round,omitempty"`
	MaxDepth int `json:"max_depth,omitempty"`
	// Ack asks the receiver to acknowledge the request at once with a
	// KindAck request to From (see Config.AckTimeout).
	Ack bool `json:"ack,omitempty"`
}

// Response is a child's answer for its region.
type Response struct {
	QueryID string  `json:"qid"`
	Matches []Match `json:"matches,omitempty"`
	// Coverage lists the intervals (in the request's Dir coordinates)
	// this answer speaks for.
	Coverage []ring.Interval `json:"coverage,omitempty"`
	// Visited counts nodes that evaluated their ad for this answer.
	Visited int `json:"visited"`
	// Messages counts requests and answers exchanged below the sender.
	Messages int `json:"messages"`
	// Depth is the number of hops of the longest path below the sender.
	Depth int `json:"depth"`
}

// Stats describes how a query ran.
type Stats struct {
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

// Answer is the result of a query at its root.
type Answer struct {
	Query   Query   `json:"query"`
	Matches []Match `json:"matches"`
	Stats   Stats   `json:"stats"`
}

// String summarises the answer on one line.
func (a *Answer) String() string {
	b, _ := json.Marshal(a.Stats)
	return fmt.Sprintf("%d matches %s", len(a.Matches), b)
}
