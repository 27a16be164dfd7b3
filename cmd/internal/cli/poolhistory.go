package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/state"
)

// poolRecordTimeout bounds how long a central manager is given to take a
// command's record: the apply does not wait longer on its history.
const poolRecordTimeout = 10 * time.Second

// poolTarget is a pool's central manager, by the address of the resource
// instance that describes the pool.
type poolTarget struct {
	addr string // the instance's address
	cm   string // its central manager's API address
}

// centralManager returns the central_manager attribute of inst, the API
// address of the pool's central manager; "" for an instance that
// describes no pool.
func centralManager(inst *state.Instance) string {
	if inst == nil || len(inst.Attributes) == 0 {
		return ""
	}
	var attrs struct {
		CM string `json:"central_manager"`
	}
	if json.Unmarshal(inst.Attributes, &attrs) != nil {
		return ""
	}
	return attrs.CM
}

// poolsOf returns the pools of s at the addresses of changes whose action
// is one of actions, each central manager once, in address order.
func poolsOf(s *state.State, changes []state.HistoryChange, keep func(action string) bool) []poolTarget {
	if s == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []poolTarget
	for _, c := range changes {
		if !keep(c.Action) {
			continue
		}
		a, err := state.ParseAddress(c.Address)
		if err != nil {
			continue
		}
		if cm := centralManager(s.Instance(a)); cm != "" && !seen[cm] {
			seen[cm] = true
			out = append(out, poolTarget{addr: c.Address, cm: cm})
		}
	}
	return out
}

// gone reports whether a change's action takes the instance's object away
// (a destroy, a replacement's old object).
func gone(action string) bool { return action == state.ActionDelete || action == state.ActionReplace }

// stays reports whether the instance's object is there after the change.
func stays(action string) bool {
	switch action {
	case state.ActionDelete, state.ActionRemoved, state.ActionForget:
		return false
	}
	return true
}

// recordGoing sends, before the apply, the record of what the command is
// about to take away to the central manager of each pool it destroys or
// replaces, which will not be there to take the record afterwards. The
// record has the serial the command is about to write. Best effort: a
// central manager that cannot take it gets a warning line.
func (m *meta) recordGoing(ctx context.Context, p *planner.Plan, prior *state.State, h *historyRecorder) {
	if h == nil || h.keep == 0 || prior == nil {
		return
	}
	after := prior.DeepCopy()
	going := false
	for _, c := range p.Changes {
		if c.Action == planner.Delete || c.Action.IsReplace() {
			after.RemoveInstance(c.Addr)
			going = true
		}
	}
	if !going {
		return
	}
	base := h.base
	base.Time = h.now()
	rec := state.NewHistoryRecord(base, state.Changes(prior, after, p.HistoryHints()))
	rec.Serial = prior.Serial + 1
	m.sendPoolRecord(ctx, &rec, poolsOf(prior, rec.Changes, gone))
}

// recordWritten sends the record the command appended to the state's
// history to the central manager of each pool it changed that is still
// there. Best effort: a central manager that cannot take it gets a
// warning line; the state's history keeps the record either way.
func (m *meta) recordWritten(ctx context.Context, ps *statePersister, prior *state.State) {
	if ps == nil || ps.history == nil || ps.last == prior || ps.last == nil || len(ps.last.History) == 0 {
		return
	}
	rec := ps.last.History[len(ps.last.History)-1]
	m.sendPoolRecord(ctx, rec, poolsOf(ps.last, rec.Changes, stays))
}

// applyRecord is r as a central manager keeps it: names, never values.
func applyRecord(r *state.HistoryRecord) *history.ApplyRecord {
	out := &history.ApplyRecord{Time: r.Time, Serial: r.Serial, Command: r.Command, User: r.User, Host: r.Host,
		PondVersion: r.PondVersion, TokenSubject: r.TokenSubject, Add: r.Summary.Add, Change: r.Summary.Change,
		Remove: r.Summary.Remove, Omitted: r.Omitted, Changes: make([]history.ApplyChange, len(r.Changes))}
	for i, c := range r.Changes {
		out.Changes[i] = history.ApplyChange{Address: c.Address, Action: c.Action, From: c.From, Attributes: c.Attributes}
	}
	return out
}

// sendPoolRecord sends r to the central manager of each of pools at once,
// with the credentials pondctl calls its pools with (auth.FindToken: the
// working directory's authority, POND_TOKEN, POND_TOKEN_FILE; the sea's
// CA), and prints a warning line for each that did not take it.
func (m *meta) sendPoolRecord(ctx context.Context, r *state.HistoryRecord, pools []poolTarget) {
	if len(pools) == 0 {
		return
	}
	warn := func(t poolTarget, err error) {
		msg := fmt.Sprintf("the record of this %s was not sent to the central manager of %s (%s): %v; the state's history keeps it (pondctl history)", r.Command, t.addr, t.cm, err)
		if m.view != nil {
			m.diags(hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: msg}})
			return
		}
		fmt.Fprintln(m.stderr, "Warning: "+msg)
	}
	tok, err := auth.FindToken(m.getenv, m.dir)
	if err == nil && tok == "" {
		err = fmt.Errorf("no token: no authority in the working directory, nor POND_TOKEN or POND_TOKEN_FILE")
	}
	tlsCfg, terr := auth.FindClientTLS(m.getenv, m.dir)
	if err == nil && terr != nil {
		err = fmt.Errorf("the sea's CA: %w", terr)
	}
	if err != nil {
		for _, t := range pools {
			warn(t, err)
		}
		return
	}
	rec := applyRecord(r)
	errs := make([]error, len(pools))
	var wg sync.WaitGroup
	for i, t := range pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), poolRecordTimeout)
			defer cancel()
			errs[i] = wire.NewClient(t.cm, tok).WithTLS(tlsCfg).Collector().RecordApply(cctx, rec)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			warn(pools[i], err)
		}
	}
}
