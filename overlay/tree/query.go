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
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/ring"
)

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
	Match(ctx context.Context, q *api.Query) (Result, bool, error)
}

// EvaluatorFunc adapts a function to Evaluator.
type EvaluatorFunc func(ctx context.Context, q *api.Query) (Result, bool, error)

// Match calls f.
func (f EvaluatorFunc) Match(ctx context.Context, q *api.Query) (Result, bool, error) {
	return f(ctx, q)
}

// better reports whether a sorts before b: higher rank first, then name.
func better(a, b *api.Match) bool {
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
	Query api.Query `json:"query"`
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
	QueryID string      `json:"qid"`
	Matches []api.Match `json:"matches,omitempty"`
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
