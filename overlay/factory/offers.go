package factory

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/pond-htc/pond/condor/negotiator"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
)

// An entry whose site is a glidein.Offerer (EC2, with its instance types)
// starts each glidein on the offer that fits the jobs it is for: the
// factory matches the idle jobs the pool's slots and the entry's idle
// glideins leave against the ads of a glidein of each offer in turn,
// cheapest first, so that a job gets the cheapest offer whose ad it
// matches, and a job no offer fits starts nothing. The glidein's startd
// offers what its offer has (the template's cpus, memory_mb and gpus give
// way to the offer's), and the site, when short of capacity for it, tries
// the entry's other offers that have at least as much of everything, by
// price and within the budget.

// offer is one of an entry's offers with its price.
type offer struct {
	glidein.Offer
	price  float64
	priced bool
}

// loadOffers reads the offers and prices of st's site, cheapest first (an
// offer with no price last, in the site's order).
func (f *Factory) loadOffers(ctx context.Context, st *entryState) {
	var offers []offer
	if o, ok := st.site.(glidein.Offerer); ok {
		for _, so := range o.Offers() {
			offers = append(offers, offer{Offer: so})
		}
	}
	prices := map[string]glidein.Price{}
	var first glidein.Price
	if p, ok := st.site.(glidein.Pricer); ok {
		ps, err := p.Prices(ctx)
		if err != nil {
			f.log.Warn("factory: the prices of an entry's site", "entry", st.e.Name, "err", err)
		}
		for i, pr := range ps {
			if i == 0 {
				first = pr
			}
			prices[pr.Offer] = pr
		}
	}
	for i := range offers {
		if pr, ok := prices[offers[i].Name]; ok && pr.Known {
			offers[i].price, offers[i].priced = pr.USDPerHour, true
		}
	}
	sort.SliceStable(offers, func(i, j int) bool {
		a, b := offers[i], offers[j]
		if a.priced != b.priced {
			return a.priced
		}
		return a.priced && a.price < b.price
	})
	f.mu.Lock()
	st.offers = offers
	st.sitePrice, st.sitePriced = first.USDPerHour, first.Known
	f.mu.Unlock()
}

// offerTemplate is the template of a glidein of st started on the offer
// name: the entry's, with the offer's resources when the site knows them.
// The glidein's startd is told the offer's CPUs and memory (NUM_CPUS,
// MEMORY) and, as it detects no GPU, its GPUs as the attribute Gpus.
func (st *entryState) offerTemplate(name string) api.FactoryTemplate {
	t := st.e.Template
	for _, o := range st.offers {
		if o.Name == name && o.Known {
			t.CPUs, t.MemoryMB, t.GPUs = o.CPUs, o.MemoryMB, o.GPUs
			t.Slots = min(t.Slots, t.CPUs)
			if o.GPUs > 0 {
				attrs := make(map[string]string, len(t.Attributes)+1)
				for k, v := range t.Attributes {
					attrs[k] = v
				}
				attrs["Gpus"] = strconv.Itoa(o.GPUs)
				t.Attributes = attrs
			}
		}
	}
	return t
}

// priceOf returns what a glidein of st started on offers costs an hour at
// most: the highest price among them (the site may fall back to any), or
// the site's price when it has no offers.
func (st *entryState) priceOf(offers []string) (float64, bool) {
	if len(offers) == 0 || len(st.offers) == 0 {
		return st.sitePrice, st.sitePriced
	}
	worst := 0.0
	for _, name := range offers {
		found := false
		for _, o := range st.offers {
			if o.Name == name {
				if !o.priced {
					return 0, false
				}
				worst, found = max(worst, o.price), true
			}
		}
		if !found {
			return 0, false
		}
	}
	return worst, true
}

// fallbacks returns the offers to start a glidein of st on when it was
// chosen for offer name: name, then st's others that have at least as
// much of everything, cheapest first, as long as each costs at most
// budget an hour (no bound when budget < 0).
func (st *entryState) fallbacks(name string, budget float64) []string {
	var chosen *offer
	for i := range st.offers {
		if st.offers[i].Name == name {
			chosen = &st.offers[i]
		}
	}
	out := []string{name}
	if chosen == nil || !chosen.Known {
		return out
	}
	for _, o := range st.offers {
		if o.Name == name || !o.Known || o.CPUs < chosen.CPUs || o.MemoryMB < chosen.MemoryMB || o.GPUs < chosen.GPUs {
			continue
		}
		if budget >= 0 && (!o.priced || o.price > budget) {
			continue
		}
		out = append(out, o.Name)
	}
	return out
}

// apiOffers renders st's offers for its status.
func (st *entryState) apiOffers() []api.FactoryOffer {
	var out []api.FactoryOffer
	for _, o := range st.offers {
		out = append(out, api.FactoryOffer{Name: o.Name, CPUs: o.CPUs, MemoryMB: o.MemoryMB, GPUs: o.GPUs,
			USDPerHour: o.price, Priced: o.priced})
	}
	return out
}

// unmatched returns subs without the jobs of ms.
func unmatched(subs []negotiator.Submitter, ms []negotiator.Match) []negotiator.Submitter {
	if len(ms) == 0 {
		return subs
	}
	type key struct{ sub, schedd, job string }
	done := make(map[key]bool, len(ms))
	for _, m := range ms {
		done[key{m.Submitter, m.Schedd, m.Job.ID}] = true
	}
	var out []negotiator.Submitter
	for _, s := range subs {
		var jobs []negotiator.Job
		for _, j := range s.Jobs {
			if !done[key{s.Name, s.Schedd, j.ID}] {
				jobs = append(jobs, j)
			}
		}
		if len(jobs) > 0 {
			s.Jobs = jobs
			out = append(out, s)
		}
	}
	return out
}

// budget returns how many of the n glideins v plans to submit its
// limits max_instances and max_hourly_cost allow, and the offers each is
// started on, and why it allows fewer; f.mu is held. A glidein counts at
// the most it may cost: the dearest of its offers (the site may fall back
// to any), whose fallbacks are only those the budget left has room for.
func (f *Factory) budget(v *view, n int) (int, [][]string, string) {
	st := v.st
	l := st.e.Limits
	live := v.queued + v.running
	cost := 0.0
	costKnown := true
	if l.MaxHourlyCost > 0 {
		stale := map[*Record]bool{}
		for _, r := range v.stale {
			stale[r] = true
		}
		for _, r := range f.records {
			if r.Entry != st.e.Name || r.Phase == Ended || stale[r] {
				continue
			}
			p, ok := st.priceOf(r.Offers)
			if !ok {
				costKnown = false
			}
			cost += p
		}
	}
	var plans [][]string
	for i := 0; i < n; i++ {
		name := ""
		if len(st.offers) > 0 {
			if i >= len(v.wants) {
				break
			}
			name = v.wants[i]
		}
		if l.MaxInstances > 0 && live+i >= l.MaxInstances {
			return i, plans, fmt.Sprintf("max_instances %d: %d glideins queued or running", l.MaxInstances, live+i)
		}
		if l.MaxHourlyCost <= 0 {
			if name != "" {
				plans = append(plans, st.fallbacks(name, -1))
			} else {
				plans = append(plans, nil)
			}
			continue
		}
		what := "a glidein"
		if name != "" {
			what = name
		}
		if !costKnown {
			return i, plans, fmt.Sprintf("max_hourly_cost $%.4f/h: a live glidein has no known price, so the cost cannot be kept", l.MaxHourlyCost)
		}
		var offers []string
		if name != "" {
			offers = st.fallbacks(name, l.MaxHourlyCost-cost)
		}
		p, ok := st.priceOf(offers)
		if !ok {
			return i, plans, fmt.Sprintf("max_hourly_cost $%.4f/h: the site has no price for %s", l.MaxHourlyCost, what)
		}
		if cost+p > l.MaxHourlyCost+1e-9 {
			return i, plans, fmt.Sprintf("max_hourly_cost $%.4f/h: %d glideins may cost $%.4f/h, and %s (up to $%.4f/h) would go over it",
				l.MaxHourlyCost, live+i, cost, what, p)
		}
		cost += p
		plans = append(plans, offers)
	}
	return min(n, len(plans)), plans, ""
}
