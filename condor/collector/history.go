package collector

import (
	"context"
	"fmt"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/wire"
)

// observe records the state of the slots of an update in the history, if
// the collector keeps one: the store keeps a row only when a slot's State,
// Activity, RemoteUser or JobId changed, and never waits on its database.
// A slot the source advertised before and no longer does is gone.
func (c *Collector) observe(typ string, prev, next []*entry) {
	h := c.opts.History
	if typ == wire.TypeMaster {
		c.observeConfigs(h, next)
	}
	if h == nil || typ != wire.TypeMachine {
		return
	}
	names := make(map[string]bool, len(next))
	for _, e := range next {
		names[e.name] = true
		st := history.SlotState{Slot: e.name}
		st.Machine, _ = e.ad.EvalAttr("Machine").StringValue()
		st.State, _ = e.ad.EvalAttr("State").StringValue()
		st.Activity, _ = e.ad.EvalAttr("Activity").StringValue()
		st.RemoteUser, _ = e.ad.EvalAttr("RemoteUser").StringValue()
		st.JobID, _ = e.ad.EvalAttr("JobId").StringValue()
		h.ObserveSlot(st)
		h.ObserveAd(e.name, st.Machine, e.wire)
	}
	for _, e := range prev {
		if !names[e.name] {
			c.gone(e)
		}
	}
}

// observeConfigs records the configurations of master ads in the
// history (history.Store.ObserveNodeConfig): each master advertises the
// hash of its effective configuration (PondConfigHash) and the
// configuration itself as the private attribute PondConfig, which is
// recorded, if the collector keeps a history, and never kept (no query
// shows it). The change is by the
// advertiser's authenticated identity, or its source.
func (c *Collector) observeConfigs(h *history.Store, next []*entry) {
	for _, e := range next {
		raw, ok := e.private["PondConfig"]
		if !ok {
			continue
		}
		priv := make(wire.Ad, len(e.private))
		for k, v := range e.private {
			if k != "PondConfig" {
				priv[k] = v
			}
		}
		e.private = priv
		if h == nil {
			continue
		}
		hash, _ := e.ad.EvalAttr("PondConfigHash").StringValue()
		s, err := classad.UnquoteString(raw)
		if err != nil {
			c.opts.Logger.Warn("history: a master ad's PondConfig is not a string", "source", e.source)
			continue
		}
		who, _ := e.ad.EvalAttr("AuthenticatedIdentity").StringValue()
		if who == "" {
			who = e.source
		}
		if err := h.ObserveNodeConfig(e.name, hash, s, who); err != nil {
			c.opts.Logger.Warn("history: a node's configuration not recorded", "source", e.source, "err", err)
		}
	}
}

// gone records in the history that a slot's ad left the collector.
func (c *Collector) gone(e *entry) {
	if c.opts.History == nil || e.typ != wire.TypeMachine {
		return
	}
	machine, _ := e.ad.EvalAttr("Machine").StringValue()
	c.opts.History.Gone(e.name, machine)
}

// History serves the history of a period (wire.HistoryRequest): the
// slots' states, each user's slot time, and the configuration changes.
func (c *Collector) History(ctx context.Context, req *wire.HistoryRequest) (*history.Report, error) {
	h := c.opts.History
	if h == nil {
		return nil, fmt.Errorf("%w: this collector keeps no history (its node has no data directory)", wire.ErrNotFound)
	}
	q := history.Query{Machine: req.Machine, Limit: req.Limit, Snapshots: req.Snapshots, ConfigOnly: req.ConfigOnly}
	if req.At > 0 {
		// The whole second: a snapshot taken in it is at or before it.
		q.Snapshots, q.At = true, time.Unix(req.At, 0).Add(time.Second-time.Millisecond)
	}
	if req.Constraint != "" {
		match, err := wire.Constraint(req.Constraint)
		if err != nil {
			return nil, err
		}
		q.Match = match
	}
	if req.Since > 0 {
		q.Since = time.Unix(req.Since, 0)
	}
	if req.Until > 0 {
		q.Until = time.Unix(req.Until, 0)
	}
	rep, err := h.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	return rep, nil
}

// maxApplyBody bounds the body of an apply record: its changes are cut at
// history.MaxApplyChanges anyway.
const maxApplyBody = 4 << 20

// RecordApply keeps the record of a pondctl command that changed the pool
// (history.ApplyRecord) in the history, under the subject of the token
// the request was authenticated with (its ADMINISTRATOR scope checked by
// the route): whatever subject the record claims is replaced. A request
// without a verified token (an open pool, whose node trusts no keys) is
// refused: an unauthenticated caller cannot write who changed the pool.
func (c *Collector) RecordApply(ctx context.Context, rec *history.ApplyRecord) (*struct{}, error) {
	cl, ok := auth.FromContext(ctx)
	if !ok || cl == nil || cl.Subject == "" {
		return nil, fmt.Errorf("%w: an apply record needs a token granting ADMINISTRATOR, verified by this node (it trusts no keys)", wire.ErrForbidden)
	}
	if err := wire.Authorize(ctx, auth.Administrator); err != nil {
		return nil, err
	}
	h := c.opts.History
	if h == nil {
		return nil, fmt.Errorf("%w: this collector keeps no history (its node has no data directory)", wire.ErrNotFound)
	}
	h.ObserveApply(*rec, cl.Subject)
	return &struct{}{}, nil
}
