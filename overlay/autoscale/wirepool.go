package autoscale

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// WirePool is a Pool over the daemons' wire protocol: the schedd at
// Schedd, the collector and negotiator at CentralManager().
type WirePool struct {
	// Schedd is the API address of the node whose schedd the policy
	// serves.
	Schedd string
	// CentralManager returns the API address of its central manager.
	CentralManager func() string
	// Token gives the token presented to the daemons (the node's), read
	// at each call so that a refreshed token is used at once; nil presents
	// none.
	Token func() string
	// TLS is the sea's TLS the daemons are called with; nil speaks plain
	// HTTP.
	TLS *tls.Config
}

func (w *WirePool) token() string {
	if w.Token == nil {
		return ""
	}
	return w.Token()
}

func (w *WirePool) client(addr string) *wire.Client {
	return wire.NewClient(addr, w.token()).WithTLS(w.TLS)
}

// Jobs implements Pool. The idle jobs come as the schedd's autoclusters
// (their count, one ad and the first ids of each), so that what the
// policy reads each cycle grows with the kinds of jobs waiting, not with
// how many; the running ones, which the slots bound, one by one.
func (w *WirePool) Jobs(ctx context.Context) ([]Job, error) {
	sc := w.client(w.Schedd).Schedd()
	idle, err := sc.IdleClusters(ctx, &wire.IdleRequest{Limit: maxJobIDs, Peek: true})
	if err != nil {
		return nil, err
	}
	running, err := sc.Queue(ctx, &wire.QueryJobsRequest{Constraint: "JobStatus == 2"})
	if err != nil {
		return nil, err
	}
	out := make([]Job, 0, len(idle.Clusters)+len(running))
	for _, ac := range idle.Clusters {
		if len(ac.IDs) == 0 {
			continue
		}
		ad, err := wire.ToClassAd(ac.Ad)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", ac.IDs[0], err)
		}
		out = append(out, Job{ID: ac.IDs[0], Ad: ad, Count: max(ac.Count, len(ac.IDs)), IDs: ac.IDs})
	}
	for _, j := range running {
		ad, err := wire.ToClassAd(j.Ad)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		host, _ := classad.UnquoteString(j.Ad["RemoteHost"])
		out = append(out, Job{ID: j.ID, Ad: ad, Running: true, Host: host})
	}
	return out, nil
}

// Slots implements Pool.
func (w *WirePool) Slots(ctx context.Context) ([]*classad.Ad, error) {
	ads, err := w.client(w.CentralManager()).Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine})
	if err != nil {
		return nil, err
	}
	out := make([]*classad.Ad, 0, len(ads))
	for _, a := range ads {
		ad, err := wire.ToClassAd(a)
		if err != nil {
			continue
		}
		out = append(out, ad)
	}
	return out, nil
}

// Reschedule implements Pool.
func (w *WirePool) Reschedule(ctx context.Context) error {
	return w.client(w.CentralManager()).Negotiator().Reschedule(ctx)
}
