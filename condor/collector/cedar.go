package collector

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// HTCondor's collector query commands and the ad type each selects. An
// empty type is read from the query's TargetType.
var cedarQueries = map[int]struct{ name, typ string }{
	5:  {"QUERY_STARTD_ADS", wire.TypeMachine},
	6:  {"QUERY_SCHEDD_ADS", wire.TypeSchedd},
	7:  {"QUERY_MASTER_ADS", wire.TypeMaster},
	12: {"QUERY_SUBMITTOR_ADS", wire.TypeSubmitter},
	20: {"QUERY_COLLECTOR_ADS", TypeCollector},
	48: {"QUERY_ANY_ADS", wire.TypeAny},
	50: {"QUERY_NEGOTIATOR_ADS", wire.TypeNegotiator},
	53: {"QUERY_MULTIPLE_ADS", ""},
	74: {"QUERY_GENERIC_ADS", ""},
}

// QUERY_STARTD_PVT_ADS (10) and QUERY_MULTIPLE_PVT_ADS (54) are not
// served: a slot's private ad holds its ClaimId, a capability only pond's
// negotiator sees, and it reads it over pond's API.

// TypeCollector is the collector's own ad type.
const TypeCollector = "Collector"

// CedarOptions configure the collector's CEDAR commands.
type CedarOptions struct {
	// Current returns the collector running now (nil when none does),
	// so that the commands follow a collector its master restarts.
	Current func() *Collector
	// Name is the collector's Name in its own ad (the node's name).
	Name string
	// Address returns the host:port at which HTCondor's clients reach
	// the collector (the agent's API address, shared with CEDAR). With a
	// Name and an Address, QUERY_COLLECTOR_ADS answers with the
	// collector's own ad.
	Address func() string
}

// CedarCommands returns the collector's commands for a cedar.Server: the
// queries HTCondor's clients send (condor_status, htcondor2.Collector.query
// and locate), each needing the READ scope as the JSON query route does,
// and the updates and invalidations HTCondor's daemons and
// htcondor2.Collector.advertise send, each needing the scope pond's JSON
// update route needs for the ad's type.
func CedarCommands(opts CedarOptions) map[int]cedar.Command {
	out := map[int]cedar.Command{}
	self := newSelfAd(opts.Name, opts.Address)
	for num, q := range cedarQueries {
		out[num] = cedar.Command{
			Name: q.name,
			Need: []auth.Scope{auth.Read, auth.Write, auth.Administrator, auth.Daemon},
			Serve: func(ctx context.Context, req *cedar.Request) error {
				c := opts.Current()
				if c == nil {
					return errors.New("no collector runs on this node")
				}
				defer self.track()()
				return c.serveCedarQuery(ctx, req.Stream, q.typ, self)
			},
		}
	}
	for num, u := range cedarUpdates {
		out[num] = cedar.Command{
			Name: u.name,
			Need: u.need(),
			Serve: func(ctx context.Context, req *cedar.Request) error {
				c := opts.Current()
				if c == nil {
					return errors.New("no collector runs on this node")
				}
				var cl *auth.Claims
				if req.Identity != nil {
					cl = req.Identity.Claims
				}
				if cl == nil {
					return errors.New("an identity without claims may not advertise")
				}
				defer self.track()()
				return c.serveCedarUpdates(ctx, req.Stream, num, cl)
			},
		}
	}
	return out
}

// adTypeNames maps the type names HTCondor's clients put in a query's
// TargetType to the types pond's collector keeps.
var adTypeNames = map[string]string{
	"machine": wire.TypeMachine, "slot": wire.TypeMachine, "startd": typeStartDaemon, "startdaemon": typeStartDaemon,
	"scheduler": wire.TypeSchedd, "schedd": wire.TypeSchedd, "submitter": wire.TypeSubmitter, "submittor": wire.TypeSubmitter,
	"daemonmaster": wire.TypeMaster, "master": wire.TypeMaster, "negotiator": wire.TypeNegotiator,
	"collector": TypeCollector, "any": wire.TypeAny,
}

// typeStartDaemon is the ad of a startd itself, which pond's startd does
// not advertise on its own: the collector makes it from the node's first
// slot, as HTCondor's collector does for a startd that sends only slots.
const typeStartDaemon = "StartD"

// cedarSelection is one ad type a query asks for, with its constraint and
// projection.
type cedarSelection struct {
	typ        string
	constraint string
	projection []string
}

func splitAttrs(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

// selections reads what a query ad asks for. A query of several types
// (QUERY_MULTIPLE_ADS) names them in TargetType, comma-separated, and may
// give each its own TYPERequirements and TYPEProjection; the plain
// Requirements and Projection apply to the others.
func selections(q *classad.Ad, typ string) ([]cedarSelection, error) {
	var types []string
	if typ != "" {
		types = []string{typ}
	} else {
		t, _ := q.EvalAttr("TargetType").StringValue()
		seen := map[string]bool{}
		for _, name := range splitAttrs(t) {
			if !seen[strings.ToLower(name)] {
				seen[strings.ToLower(name)] = true
				types = append(types, name)
			}
		}
		if len(types) == 0 {
			types = []string{wire.TypeAny}
		}
		if len(types) > maxQueryTypes {
			return nil, fmt.Errorf("the query asks for %d ad types; at most %d are answered at once", len(types), maxQueryTypes)
		}
	}
	constraint := ""
	if e, ok := q.Lookup("Requirements"); ok {
		constraint = e.String()
	}
	p, _ := q.EvalAttr("Projection").StringValue()
	var out []cedarSelection
	for _, t := range types {
		sel := cedarSelection{typ: t, constraint: constraint, projection: splitAttrs(p)}
		if e, ok := q.Lookup(t + "Requirements"); ok {
			sel.constraint = e.String()
		}
		if v, ok := q.EvalAttr(t + "Projection").StringValue(); ok {
			sel.projection = splitAttrs(v)
		}
		if known, ok := adTypeNames[strings.ToLower(t)]; ok {
			sel.typ = known
		}
		out = append(out, sel)
	}
	return out, nil
}

// maxQueryTypes bounds the ad types one query may ask for (each a pass
// over the collector's ads); a type named twice counts once.
const maxQueryTypes = 32

// serveCedarQuery reads a query ad (Requirements, Projection, LimitResults,
// and TargetType for a generic or multiple query) and answers each
// matching ad as a 1 and the ad, then a 0, in one message. A query whose
// constraint does not parse is answered with no ads, as HTCondor's
// collector answers it.
func (c *Collector) serveCedarQuery(ctx context.Context, s *cedar.Stream, typ string, self *selfAd) error {
	q, err := s.GetAd()
	if err != nil {
		return fmt.Errorf("reading the query: %w", err)
	}
	if err := s.EndRead(); err != nil {
		return fmt.Errorf("reading the query: %w", err)
	}
	limit, _ := q.EvalAttr("LimitResults").IntValue()
	sent := int64(0)
	sels, err := selections(q, typ)
	if err != nil {
		// Answered with no ads, as a query HTCondor's collector cannot
		// serve.
		c.opts.Logger.Warn("cedar query refused", "err", err)
	}
	for _, sel := range sels {
		ads, err := c.cedarAds(sel, self)
		if err != nil {
			c.opts.Logger.Warn("cedar query refused", "type", sel.typ, "err", err)
			continue
		}
		p := cedar.NewProjection(sel.projection)
		for _, ad := range ads {
			if limit > 0 && sent >= limit {
				break
			}
			if err := s.PutInt(1); err != nil {
				return err
			}
			if err := s.PutWireAd(ad, p); err != nil {
				return err
			}
			sent++
		}
	}
	if err := s.PutInt(0); err != nil {
		return err
	}
	return s.EndMessage()
}

// cedarAds returns the live ads a selection picks in CEDAR's wire form,
// each stored ad printed once for every query that sends it.
func (c *Collector) cedarAds(sel cedarSelection, self *selfAd) ([]*cedar.WireAd, error) {
	match, err := wire.Constraint(sel.constraint)
	if err != nil {
		return nil, err
	}
	var out []*cedar.WireAd
	every := strings.EqualFold(sel.typ, wire.TypeAny)
	if self != nil && (every || strings.EqualFold(sel.typ, TypeCollector)) {
		if ad := self.build(c); match(ad) {
			out = append(out, cedar.NewWireAd(ad))
		}
	}
	if strings.EqualFold(sel.typ, typeStartDaemon) {
		// The startds' own ads, and for a startd that sends only
		// slots, one made from its first slot.
		own := map[string]bool{}
		for _, e := range c.entries(typeStartDaemon, func(*classad.Ad) bool { return true }) {
			m, _ := e.ad.EvalAttr("Machine").StringValue()
			own[strings.ToLower(m)] = true
		}
		for _, e := range c.entries(wire.TypeMachine, func(*classad.Ad) bool { return true }) {
			m, _ := e.ad.EvalAttr("Machine").StringValue()
			if own[strings.ToLower(m)] {
				continue
			}
			if d := startDaemonAd(e.ad); d != nil && match(d) {
				out = append(out, cedar.NewWireAd(d))
			}
		}
	}
	for _, e := range c.entries(sel.typ, match) {
		w := e.cedar.Load()
		if w == nil {
			w = cedar.NewWireAd(e.ad)
			e.cedar.Store(w)
		}
		out = append(out, w)
	}
	return out, nil
}

// startDaemonAd makes a startd's own ad from its first slot's ad, as
// HTCondor's collector makes it for a startd that sends only slots: the
// slot's ad without what only matchmaking reads. Other slots give none.
func startDaemonAd(slot *classad.Ad) *classad.Ad {
	id, _ := slot.EvalAttr("SlotID").IntValue()
	if dyn, _ := slot.EvalAttr("SlotDynamic").BoolValue(); id != 1 || dyn {
		return nil
	}
	d := slot.Copy()
	d.SetString("MyType", typeStartDaemon)
	for _, a := range []string{"Requirements", "Rank", "Start", "State", "Activity", "SlotID", "SlotType", "SlotTypeID", "TargetType"} {
		d.Delete(a)
	}
	return d
}
