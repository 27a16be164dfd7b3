package negotiator

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// GroupsAttr is the attribute of the negotiator's ad that lists the
// accounting groups of the last cycle, each a record of what
// condor_userprio -quotas shows of it: Name, ConfigQuota, IsStatic,
// EffectiveQuota, SubtreeQuota, AcceptSurplus, Requested, Allocated,
// WeightedResourcesUsed, Submitters and Blocked (the idle jobs its quota
// held back) (pond's own: condor status -negotiator and condor q
// -better-analyze read it).
const GroupsAttr = "PondGroupQuotas"

// pendingUse is a match made with group quotas that the collector's slot
// ads may not show yet: its weight counts in its submitter's usage.
type pendingUse struct {
	slot      string
	submitter string
	weight    float64
	at        time.Time
}

// SlotWeight is the weight of a slot in group quotas and usage, as
// HTCondor's default SLOT_WEIGHT: its SlotWeight attribute if it has one,
// else its cpus.
func SlotWeight(ad *classad.Ad) float64 {
	if w, ok := ad.EvalAttr("SlotWeight").NumberValue(); ok && w >= 0 {
		return w
	}
	return max(ad.EvalNumber("Cpus", nil, 1), 0)
}

// ClaimSubmitter is the submitter a claimed slot's ad says it runs for:
// its AccountingGroup (group.user@domain), else its RemoteUser.
func ClaimSubmitter(ad *classad.Ad) string {
	if g, ok := ad.EvalAttr("AccountingGroup").StringValue(); ok && g != "" {
		return g
	}
	u, _ := ad.EvalAttr("RemoteUser").StringValue()
	return u
}

// groupUsage returns the slot weight of the pool's claimed slots and what
// each submitter holds of it, with the matches of earlier cycles the slot
// ads do not show yet. seen maps slot Names to when the collector last
// heard of them; the claimed slots are added to it.
func (n *Negotiator) groupUsage(ctx context.Context, coll collectorConn, seen map[string]int64) (float64, map[string]float64, error) {
	ads, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine,
		Constraint: `State == "Claimed" && PartitionableSlot =!= true`})
	if err != nil {
		return 0, nil, fmt.Errorf("querying claimed slots: %w", err)
	}
	usage := map[string]float64{}
	var total float64
	for _, w := range ads {
		ad, err := wire.ToClassAd(w)
		if err != nil {
			continue
		}
		name, _ := ad.EvalAttr("Name").StringValue()
		if t, err := strconv.ParseInt(strings.TrimSpace(w["LastHeardFrom"]), 10, 64); err == nil && name != "" {
			seen[name] = max(seen[name], t)
		}
		wt := SlotWeight(ad)
		total += wt
		if sub := ClaimSubmitter(ad); sub != "" {
			usage[sub] += wt
		}
	}
	now := n.opts.Now()
	n.mu.Lock()
	keep := n.groupPending[:0]
	for _, p := range n.groupPending {
		if t, ok := seen[p.slot]; ok && t > p.at.Unix() || now.Sub(p.at) > pendingTTL {
			continue
		}
		keep = append(keep, p)
		usage[p.submitter] += p.weight
	}
	clear(n.groupPending[len(keep):])
	n.groupPending = keep
	n.mu.Unlock()
	return total, usage, nil
}

// recordGroups keeps the cycle's matches until the slot ads show them
// and the groups' figures for the negotiator's ad.
func (n *Negotiator) recordGroups(gc *groupCycle, matches []Match) {
	if gc == nil {
		return
	}
	now := n.opts.Now()
	report := gc.t.report()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range matches {
		w := SlotWeight(m.Slot.Ad)
		if m.Slot.Partitionable {
			w = max(m.Job.Ad.EvalNumber("RequestCpus", nil, 1), 1)
		}
		n.groupPending = append(n.groupPending, pendingUse{slot: m.Slot.Name, submitter: m.Submitter, weight: w, at: now})
	}
	n.groupReport = report
}

// Groups returns the accounting groups' figures of the last cycle (nil
// without group quotas).
func (n *Negotiator) Groups() []GroupQuota {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]GroupQuota(nil), n.groupReport...)
}

// setGroupAttrs puts the groups of the last cycle in the negotiator's ad.
func (n *Negotiator) setGroupAttrs(ad *classad.Ad) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.groups == nil || len(n.groupReport) == 0 {
		return
	}
	recs := make([]classad.Value, 0, len(n.groupReport))
	for _, g := range n.groupReport {
		r := classad.NewAd()
		r.SetString("Name", g.Name)
		r.SetReal("ConfigQuota", g.ConfigQuota)
		r.SetBool("IsStatic", g.Static)
		r.SetReal("EffectiveQuota", g.Quota)
		r.SetReal("SubtreeQuota", g.SubtreeQuota)
		r.SetBool("AcceptSurplus", g.AcceptSurplus)
		r.SetReal("Requested", g.Requested)
		r.SetReal("Allocated", g.Allocated)
		r.SetReal("WeightedResourcesUsed", g.Usage)
		r.SetInt("Submitters", int64(g.Submitters))
		r.SetInt("Blocked", int64(g.Blocked))
		recs = append(recs, classad.AdValue(r))
	}
	ad.SetValue(GroupsAttr, classad.List(recs))
}

// ReadGroupQuotas reads the groups' records of a negotiator's ad.
func ReadGroupQuotas(ad *classad.Ad) []GroupQuota {
	if ad == nil {
		return nil
	}
	list, _ := ad.EvalAttr(GroupsAttr).ListValue()
	var out []GroupQuota
	for _, v := range list {
		r, ok := v.AdValue()
		if !ok {
			continue
		}
		var g GroupQuota
		g.Name, _ = r.EvalAttr("Name").StringValue()
		if g.Name == "" {
			continue
		}
		g.ConfigQuota, _ = r.EvalAttr("ConfigQuota").NumberValue()
		g.Static, _ = r.EvalAttr("IsStatic").BoolValue()
		g.Quota, _ = r.EvalAttr("EffectiveQuota").NumberValue()
		g.SubtreeQuota, _ = r.EvalAttr("SubtreeQuota").NumberValue()
		g.AcceptSurplus, _ = r.EvalAttr("AcceptSurplus").BoolValue()
		g.Requested, _ = r.EvalAttr("Requested").NumberValue()
		g.Allocated, _ = r.EvalAttr("Allocated").NumberValue()
		g.Usage, _ = r.EvalAttr("WeightedResourcesUsed").NumberValue()
		s, _ := r.EvalAttr("Submitters").IntValue()
		b, _ := r.EvalAttr("Blocked").IntValue()
		g.Submitters, g.Blocked = int(s), int(b)
		out = append(out, g)
	}
	return out
}

// AssignGroup is the group, of those named (as GroupQuota names them,
// RootGroup among them), a submitter negotiates in: the one its name
// before the last period names, or its deepest configured parent, else
// RootGroup (see GroupTree.GroupOf).
func AssignGroup(names []string, submitter string) string {
	known := map[string]string{}
	for _, n := range names {
		known[strings.ToLower(n)] = n
	}
	at := strings.LastIndexByte(submitter, '@')
	if at < 0 {
		return RootGroup
	}
	name := submitter[:at]
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		return RootGroup
	}
	best := RootGroup
	path := strings.Split(name[:dot], ".")
	for i := range path {
		g, ok := known[strings.ToLower(strings.Join(path[:i+1], "."))]
		if !ok {
			break
		}
		best = g
	}
	return best
}
