// Package query is the ClassAd side of a sea query: the evaluator with
// which every node of a PonD tree matches a query (a job's Requirements and
// Rank) against its own live machine ad, as HTCondor's matchmaking does.
package query

import (
	"context"
	"fmt"
	"sync"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/tree"
)

// Evaluator matches queries against a node's live machine ad, as PonD does:
// the query is a job ad whose Requirements and Rank are evaluated with the
// job as MY and the machine as TARGET, and the machine's own Requirements
// (or START) must accept the job.
type Evaluator struct {
	// Ad returns the machine ad, refreshed as the node sees fit.
	Ad func() *classad.Ad

	mu    sync.Mutex
	cache map[string]*compiled
	order []string
}

type compiled struct {
	job  *classad.Ad
	req  *classad.Program
	rank *classad.Program
	err  error
}

// cacheSize bounds how many distinct queries keep their compiled form.
const cacheSize = 64

// NewEvaluator returns an evaluator over the ads ad returns.
func NewEvaluator(ad func() *classad.Ad) *Evaluator {
	return &Evaluator{Ad: ad, cache: map[string]*compiled{}}
}

func (e *Evaluator) compile(q *api.Query) *compiled {
	key := q.Requirements + "\x00" + q.Rank
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.cache[key]; ok {
		return c
	}
	c := &compiled{job: classad.NewAd()}
	req := q.Requirements
	if req == "" {
		req = "true"
	}
	if c.req, c.err = classad.Compile(req); c.err != nil {
		c.err = fmt.Errorf("requirements: %w", c.err)
	} else if q.Rank != "" {
		if c.rank, c.err = classad.Compile(q.Rank); c.err != nil {
			c.err = fmt.Errorf("rank: %w", c.err)
		}
	}
	if c.err == nil {
		c.job.Set(classad.AttrRequirements, c.req.Expr())
		if c.rank != nil {
			c.job.Set(classad.AttrRank, c.rank.Expr())
		}
	}
	if len(e.order) >= cacheSize {
		delete(e.cache, e.order[0])
		e.order = e.order[1:]
	}
	e.cache[key] = c
	e.order = append(e.order, key)
	return c
}

// Match implements tree.Evaluator.
func (e *Evaluator) Match(ctx context.Context, q *api.Query) (tree.Result, bool, error) {
	c := e.compile(q)
	if c.err != nil {
		return tree.Result{}, false, c.err
	}
	machine := e.Ad()
	if machine == nil {
		return tree.Result{}, false, nil
	}
	if !c.req.EvalBool(c.job, machine) {
		return tree.Result{}, false, nil
	}
	for _, name := range []string{classad.AttrRequirements, "START"} {
		if expr, ok := machine.Lookup(name); ok {
			if !classad.EvalWith(expr, machine, c.job).IsTrue() {
				return tree.Result{}, false, nil
			}
			break
		}
	}
	res := tree.Result{}
	if c.rank != nil {
		if r, ok := c.rank.EvalNumber(c.job, machine); ok {
			res.Rank = r
		}
	}
	if len(q.Attrs) > 0 {
		res.Attrs = make(map[string]any, len(q.Attrs))
		for _, name := range q.Attrs {
			if v, ok := jsonValue(machine.EvalAttr(name)); ok {
				res.Attrs[name] = v
			}
		}
	}
	return res, true, nil
}

// jsonValue converts a ClassAd value to a value that survives JSON.
func jsonValue(v classad.Value) (any, bool) {
	if b, ok := v.BoolValue(); ok {
		return b, true
	}
	if i, ok := v.IntValue(); ok {
		return i, true
	}
	if f, ok := v.RealValue(); ok {
		return f, true
	}
	if s, ok := v.StringValue(); ok {
		return s, true
	}
	if v.IsUndefined() || v.IsError() {
		return nil, false
	}
	return v.String(), true
}
