package factory

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/negotiator"
	"github.com/pond-htc/pond/condor/wire"
)

// Pool is what the factory reads of its pool: the idle jobs, as the
// negotiator sees them, and the glideins present in the collector.
type Pool interface {
	// Idle returns the submitters with idle jobs, each with its idle jobs,
	// as the negotiator fetches them.
	Idle(ctx context.Context) ([]negotiator.Submitter, error)
	// Glideins returns the glideins whose startd reports to the
	// collector, by glidein ID, and the unclaimed slots of the pool that
	// are no glidein's: jobs those can run need no glidein.
	Glideins(ctx context.Context) (map[string]Presence, []*classad.Ad, error)
}

// Presence is a glidein seen in the collector.
type Presence struct {
	// Slots is how many slot ads it has; Claimed how many are claimed.
	Slots   int
	Claimed int
}

// WirePool is a Pool over the daemons' wire protocol: the collector at
// CentralManager, and the schedds its submitter ads name.
type WirePool struct {
	// CentralManager returns the API address of the collector.
	CentralManager func() string
	// Token gives the token presented to the daemons, read at each call;
	// nil presents none.
	Token func() string
	// TLS is the sea's TLS; nil speaks plain HTTP.
	TLS *tls.Config
}

func (w *WirePool) client(addr string) *wire.Client {
	tok := ""
	if w.Token != nil {
		tok = w.Token()
	}
	return wire.NewClient(addr, tok).WithTLS(w.TLS)
}

// Idle implements Pool: the submitter ads with idle jobs, and each one's
// idle jobs from its schedd, as the negotiator asks them.
func (w *WirePool) Idle(ctx context.Context) ([]negotiator.Submitter, error) {
	ads, err := w.client(w.CentralManager()).Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeSubmitter})
	if err != nil {
		return nil, fmt.Errorf("querying submitters: %w", err)
	}
	var subs []negotiator.Submitter
	for _, a := range ads {
		ad, err := wire.ToClassAd(a)
		if err != nil {
			continue
		}
		name, _ := ad.EvalAttr("Name").StringValue()
		owner, _ := ad.EvalAttr("Owner").StringValue()
		schedd, _ := ad.EvalAttr("PondAddress").StringValue()
		idle, _ := ad.EvalAttr("IdleJobs").IntValue()
		running, _ := ad.EvalAttr("RunningJobs").IntValue()
		if idle == 0 || schedd == "" {
			continue
		}
		// A peek: the factory's look is not the pool's negotiator
		// considering the jobs, after which they may flock.
		jobs, err := w.client(schedd).Schedd().Idle(ctx, &wire.IdleRequest{Owner: owner, Peek: true})
		if err != nil {
			return nil, fmt.Errorf("idle jobs of %s at %s: %w", name, schedd, err)
		}
		s := negotiator.Submitter{Name: name, Schedd: schedd, Running: int(running)}
		for _, j := range jobs {
			jad, err := wire.ToClassAd(j.Ad)
			if err != nil {
				continue
			}
			s.Jobs = append(s.Jobs, negotiator.Job{ID: j.ID, Ad: jad})
		}
		subs = append(subs, s)
	}
	return subs, nil
}

// Glideins implements Pool: the machine ads with a GlideinID, and the
// unclaimed others.
func (w *WirePool) Glideins(ctx context.Context) (map[string]Presence, []*classad.Ad, error) {
	ads, err := w.client(w.CentralManager()).Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine,
		Constraint: `IsGlidein =?= true || State == "Unclaimed"`})
	if err != nil {
		return nil, nil, fmt.Errorf("querying glideins: %w", err)
	}
	out := map[string]Presence{}
	var others []*classad.Ad
	for _, a := range ads {
		id, err := classad.UnquoteString(a["GlideinID"])
		if err != nil || id == "" {
			if ad, err := wire.ToClassAd(a); err == nil {
				others = append(others, ad)
			}
			continue
		}
		state, _ := classad.UnquoteString(a["State"])
		p := out[id]
		p.Slots++
		if state == "Claimed" {
			p.Claimed++
		}
		out[id] = p
	}
	return out, others, nil
}
