package collector

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/wire"
)

// HTCondor's collector query commands and the ad type each selects.
var cedarQueries = map[int]struct{ name, typ string }{
	5:  {"QUERY_STARTD_ADS", wire.TypeMachine},
	6:  {"QUERY_SCHEDD_ADS", wire.TypeSchedd},
	7:  {"QUERY_MASTER_ADS", wire.TypeMaster},
	12: {"QUERY_SUBMITTOR_ADS", wire.TypeSubmitter},
	20: {"QUERY_COLLECTOR_ADS", "Collector"},
	48: {"QUERY_ANY_ADS", wire.TypeAny},
	50: {"QUERY_NEGOTIATOR_ADS", wire.TypeNegotiator},
	74: {"QUERY_GENERIC_ADS", ""},
}

// CedarCommands returns the collector's commands for a cedar.Server: the
// queries HTCondor's clients send (condor_status, htcondor2.Collector.query
// and locate), each needing the READ scope as the JSON query route does.
// current returns the collector running now (nil when none does), so that
// the commands follow a collector its master restarts.
func CedarCommands(current func() *Collector) map[int]cedar.Command {
	out := map[int]cedar.Command{}
	for num, q := range cedarQueries {
		out[num] = cedar.Command{
			Name: q.name,
			Need: []auth.Scope{auth.Read, auth.Write, auth.Administrator, auth.Daemon},
			Serve: func(ctx context.Context, req *cedar.Request) error {
				c := current()
				if c == nil {
					return errors.New("no collector runs on this node")
				}
				return c.serveCedarQuery(ctx, req.Stream, q.typ)
			},
		}
	}
	return out
}

// serveCedarQuery reads a query ad (Requirements, Projection, LimitResults,
// and TargetType for a generic query) and answers each matching ad as a 1
// and the ad, then a 0, in one message.
func (c *Collector) serveCedarQuery(ctx context.Context, s *cedar.Stream, typ string) error {
	q, err := s.GetAd()
	if err != nil {
		return fmt.Errorf("reading the query: %w", err)
	}
	if err := s.EndRead(); err != nil {
		return fmt.Errorf("reading the query: %w", err)
	}
	if typ == "" {
		typ, _ = q.EvalAttr("TargetType").StringValue()
		if typ == "" {
			typ = wire.TypeAny
		}
	}
	req := &wire.QueryAdsRequest{Type: typ}
	if e, ok := q.Lookup("Requirements"); ok {
		req.Constraint = e.String()
	}
	if p, ok := q.EvalAttr("Projection").StringValue(); ok {
		req.Projection = strings.FieldsFunc(p, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	}
	limit, _ := q.EvalAttr("LimitResults").IntValue()
	resp, err := c.Query(ctx, req)
	if err != nil {
		// HTCondor's collector answers a bad query with no ads.
		c.opts.Logger.Warn("cedar query refused", "type", typ, "err", err)
		resp = &wire.QueryAdsResponse{}
	}
	for i, a := range resp.Ads {
		if limit > 0 && int64(i) >= limit {
			break
		}
		ad, err := wire.ToClassAd(a)
		if err != nil {
			return fmt.Errorf("ad %q: %w", a["Name"], err)
		}
		if err := s.PutInt(1); err != nil {
			return err
		}
		if err := s.PutAd(ad, nil); err != nil {
			return err
		}
	}
	if err := s.PutInt(0); err != nil {
		return err
	}
	return s.EndMessage()
}
