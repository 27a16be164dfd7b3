package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// cedarUpdate is one of HTCondor's update or invalidation commands: the
// ad type it names (empty for the generic ones, which take the type from
// the ad) and whether it withdraws ads.
type cedarUpdate struct {
	name       string
	typ        string
	invalidate bool
}

// need is the scopes of which a caller must hold one to send the command:
// the scope pond's JSON route needs for the type, and for the generic
// commands any advertising scope (each ad is then checked for its own
// type).
func (u cedarUpdate) need() []auth.Scope {
	if u.typ != "" {
		return []auth.Scope{AdvertiseScope(u.typ)}
	}
	return []auth.Scope{auth.AdvertiseStartd, auth.AdvertiseSchedd, auth.AdvertiseMaster, auth.Daemon}
}

// HTCondor's update and invalidation commands the collector serves.
// UPDATE_COLLECTOR_AD is not among them: the collector's ad is its own.
var cedarUpdates = map[int]cedarUpdate{
	0:  {"UPDATE_STARTD_AD", wire.TypeMachine, false},
	1:  {"UPDATE_SCHEDD_AD", wire.TypeSchedd, false},
	2:  {"UPDATE_MASTER_AD", wire.TypeMaster, false},
	11: {"UPDATE_SUBMITTOR_AD", wire.TypeSubmitter, false},
	49: {"UPDATE_NEGOTIATOR_AD", wire.TypeNegotiator, false},
	58: {"UPDATE_AD_GENERIC", "", false},
	13: {"INVALIDATE_STARTD_ADS", wire.TypeMachine, true},
	14: {"INVALIDATE_SCHEDD_ADS", wire.TypeSchedd, true},
	15: {"INVALIDATE_MASTER_ADS", wire.TypeMaster, true},
	18: {"INVALIDATE_SUBMITTOR_ADS", wire.TypeSubmitter, true},
	51: {"INVALIDATE_NEGOTIATOR_ADS", wire.TypeNegotiator, true},
	59: {"INVALIDATE_ADS_GENERIC", "", true},
}

// dcNop ends a connection of several updates: HTCondor's client
// (htcondor2.Collector.advertise over TCP) sends each further ad as its
// command number and the ad, and DC_NOP once it has sent them all.
const dcNop = 60011

// maxCedarLifetime bounds the lifetime an ad may ask for with
// ClassAdLifetime.
const maxCedarLifetime = 24 * time.Hour

// serveCedarUpdates serves the command num and each further command the
// client sends on the connection, until DC_NOP or the end of the
// connection. Every command is authorized as the first was; an ad that is
// malformed or refused ends the connection with nothing of it stored.
func (c *Collector) serveCedarUpdates(ctx context.Context, s *cedar.Stream, num int, cl *auth.Claims) error {
	for n := 1; ; n++ {
		u := cedarUpdates[num]
		var err error
		if u.invalidate {
			err = c.cedarInvalidate(s, u, cl)
		} else {
			err = c.cedarAdvertise(s, num, u, cl)
		}
		if err != nil {
			return fmt.Errorf("%s (ad %d of the connection): %w", u.name, n, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		next, err := s.GetInt32()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the next command: %w", err)
		}
		if next == dcNop {
			return s.EndRead()
		}
		nu, ok := cedarUpdates[int(next)]
		if !ok {
			return fmt.Errorf("command %d after %s: only updates and DC_NOP may follow an update", next, u.name)
		}
		if !allowsAny(cl, nu.need()) {
			return fmt.Errorf("%w: %s may not run %s", wire.ErrForbidden, cl.Subject, nu.name)
		}
		num = int(next)
	}
}

func allowsAny(cl *auth.Claims, need []auth.Scope) bool {
	for _, n := range need {
		if cl.Allows(n) {
			return true
		}
	}
	return false
}

// cedarAdvertise reads one ad (and, for UPDATE_STARTD_AD, the slot's
// private ad when one follows) and stores it as pond's update route
// would: the same scope for its type, the same binding of a node's
// identity to its own ads, AuthenticatedIdentity from the proven identity.
// Each ad is its own source, named after the ad, so that it replaces only
// the earlier ad of the same Name, as HTCondor's collector keys its ads.
func (c *Collector) cedarAdvertise(s *cedar.Stream, num int, u cedarUpdate, cl *auth.Claims) error {
	ad, err := s.GetAd()
	if err != nil {
		return fmt.Errorf("reading the ad: %w", err)
	}
	var private *classad.Ad
	if num == 0 {
		if end, err := s.AtEnd(); err != nil {
			return fmt.Errorf("reading the private ad: %w", err)
		} else if !end {
			if private, err = s.GetAd(); err != nil {
				return fmt.Errorf("reading the private ad: %w", err)
			}
		}
	}
	if err := s.EndRead(); err != nil {
		return fmt.Errorf("reading the ad: %w", err)
	}
	req, err := cedarUpdateRequest(u.typ, ad, private)
	if err != nil {
		return fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	return c.update(cl, req)
}

// cedarUpdateRequest turns an ad a client advertises into pond's update
// of one ad. The ad needs a Name; its MyType, if any, must be the
// command's type; a generic ad must have a MyType, and not the
// collector's.
func cedarUpdateRequest(typ string, ad, private *classad.Ad) (*wire.UpdateRequest, error) {
	my, _ := ad.EvalAttr("MyType").StringValue()
	switch {
	case typ == "" && my == "":
		return nil, errors.New("a generic ad needs a MyType")
	case typ == "":
		typ = my
		if known, ok := adTypeNames[strings.ToLower(my)]; ok {
			typ = known
		}
		if typ == TypeCollector || typ == wire.TypeAny {
			return nil, fmt.Errorf("ads of type %q may not be advertised", my)
		}
	case typ == wire.TypeMachine && adTypeNames[strings.ToLower(my)] == typeStartDaemon:
		// HTCondor's startd sends its own ad with UPDATE_STARTD_AD too.
		typ = typeStartDaemon
	case my != "" && !strings.EqualFold(my, typ) && adTypeNames[strings.ToLower(my)] != typ:
		return nil, fmt.Errorf("an ad of type %q sent as %s", my, typ)
	}
	ad.SetString("MyType", typ)
	name, ok := ad.EvalAttr("Name").StringValue()
	if !ok || name == "" {
		return nil, errors.New("the ad has no Name")
	}
	req := &wire.UpdateRequest{Type: typ, Source: cedarSource(typ, name, ad), Ads: []wire.Ad{wire.FromClassAd(ad)}}
	if life, ok := ad.EvalAttr("ClassAdLifetime").IntValue(); ok && life > 0 {
		req.Lifetime = int(min(time.Duration(life)*time.Second, maxCedarLifetime) / time.Second)
	}
	if private != nil {
		private.Delete("MyType")
		private.Delete("TargetType")
		req.Private = map[string]wire.Ad{name: wire.FromClassAd(private)}
	}
	return req, nil
}

// cedarSource names the source of an ad advertised over CEDAR after the
// ad, in the form pond's sources take, "WHAT@NODE", so that a node's
// identity may advertise it only for its own node and the ad goes when
// its node is lost: NODE is the host of a slot's Name ("slot1@NODE"), a
// submitter's ScheddName, or the Name.
func cedarSource(typ, name string, ad *classad.Ad) string {
	node := name
	if i := strings.LastIndex(name, "@"); i >= 0 && !strings.EqualFold(typ, wire.TypeSubmitter) {
		node = name[i+1:]
	}
	if strings.EqualFold(typ, wire.TypeSubmitter) {
		node, _ = ad.EvalAttr("ScheddName").StringValue()
	}
	return "cedar:" + strings.ReplaceAll(name, "@", "%40") + "@" + node
}

// cedarInvalidate reads an invalidation's query ad and withdraws the ads
// of the type it selects: those its Requirements match, or without
// Requirements the ad of its Name. The generic command names the type in
// TargetType.
func (c *Collector) cedarInvalidate(s *cedar.Stream, u cedarUpdate, cl *auth.Claims) error {
	q, err := s.GetAd()
	if err != nil {
		return fmt.Errorf("reading the query: %w", err)
	}
	if err := s.EndRead(); err != nil {
		return fmt.Errorf("reading the query: %w", err)
	}
	typ := u.typ
	if typ == "" {
		t, _ := q.EvalAttr("TargetType").StringValue()
		typ = t
		if known, ok := adTypeNames[strings.ToLower(t)]; ok {
			typ = known
		}
		if typ == "" || typ == wire.TypeAny || typ == TypeCollector {
			return fmt.Errorf("%w: invalidation of type %q", wire.ErrBadRequest, t)
		}
	}
	var match func(*classad.Ad) bool
	if e, ok := q.Lookup("Requirements"); ok {
		if match, err = wire.Constraint(e.String()); err != nil {
			return err
		}
	} else if name, ok := q.EvalAttr("Name").StringValue(); ok && name != "" {
		match = func(ad *classad.Ad) bool {
			n, _ := ad.EvalAttr("Name").StringValue()
			return strings.EqualFold(n, name)
		}
	} else {
		return fmt.Errorf("%w: an invalidation needs Requirements or a Name", wire.ErrBadRequest)
	}
	n, err := c.invalidateMatching(cl, typ, match)
	if err != nil {
		return err
	}
	c.opts.Logger.Debug("cedar invalidation", "type", typ, "ads", n)
	return nil
}

// invalidateMatching withdraws the ads of type typ that match, with
// Invalidate's authorization: the scope the type needs, and a node's
// identity withdraws only its node's ads. It returns how many it dropped.
func (c *Collector) invalidateMatching(cl *auth.Claims, typ string, match func(*classad.Ad) bool) (int, error) {
	if err := authorize(cl, AdvertiseScope(typ)); err != nil {
		return 0, err
	}
	node, bound := boundNode(cl)
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for t, m := range c.ads {
		if !strings.EqualFold(t, typ) {
			continue
		}
		for src, es := range m {
			if bound && sourceOf(node, src) != nil {
				continue
			}
			kept := make([]*entry, 0, len(es))
			for _, e := range es {
				if match(e.ad) {
					n++
				} else {
					kept = append(kept, e)
				}
			}
			if len(kept) == 0 {
				delete(m, src)
			} else {
				m[src] = kept
			}
		}
	}
	return n, nil
}
