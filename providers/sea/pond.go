package sea

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
)

// pondMember is one node of a pond.
type pondMember struct {
	Name string
	API  string
	Rank float64
}

func membersValue(ms []pondMember) (names, details cty.Value) {
	if len(ms) == 0 {
		return cty.ListValEmpty(cty.String), cty.ListValEmpty(memberType)
	}
	n := make([]cty.Value, len(ms))
	d := make([]cty.Value, len(ms))
	for i, m := range ms {
		n[i] = cty.StringVal(m.Name)
		d[i] = cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(m.Name), "api": cty.StringVal(m.API), "rank": cty.NumberFloatVal(m.Rank)})
	}
	return cty.ListVal(n), cty.ListVal(d)
}

func membersOf(v cty.Value) []pondMember {
	if v.IsNull() || !v.IsKnown() {
		return nil
	}
	d := v.GetAttr("member_details")
	if d.IsNull() || !d.IsKnown() {
		return nil
	}
	var out []pondMember
	for _, e := range d.AsValueSlice() {
		r, _ := e.GetAttr("rank").AsBigFloat().Float64()
		out = append(out, pondMember{Name: e.GetAttr("name").AsString(), API: e.GetAttr("api").AsString(), Rank: r})
	}
	return out
}

// query runs the pond's query for up to k candidates, best first, and says
// whether the answer lacks no candidate (see whole). Nodes of declared
// pools and members of other ponds are left out: they would decline.
func (p *Provider) query(ctx context.Context, cfg cty.Value, id string, k int) ([]pondMember, bool, error) {
	qp, err := p.queryParams(cfg, str(cfg, "central_manager", ""), k, []string{APIAttr})
	if err != nil {
		return nil, false, err
	}
	req := qp.q.Requirements
	if strings.TrimSpace(req) == "" {
		req = "true" // as for a sea_query
	}
	qp.q.Requirements = fmt.Sprintf("(%s) && TARGET.PondPool =?= \"\" && (TARGET.PondID =?= undefined || TARGET.PondID =?= %q)", req, id)
	return p.runMembers(ctx, qp)
}

// runMembers runs a query and returns its matches as members, and whether
// the answer lacks no match (see whole).
func (p *Provider) runMembers(ctx context.Context, qp queryParams) ([]pondMember, bool, error) {
	ans, err := p.run(ctx, qp)
	if err != nil {
		return nil, false, err
	}
	out := make([]pondMember, 0, len(ans.Matches))
	for _, m := range ans.Matches {
		out = append(out, pondMember{Name: m.Name, API: apiOf(m), Rank: m.Rank})
	}
	return out, whole(qp.q, ans), nil
}

// findMembers asks the sea which nodes belong to pond id, by tree query.
// complete is false when part of the sea did not answer.
func (p *Provider) findMembers(ctx context.Context, v cty.Value, id string) ([]pondMember, bool, error) {
	if id == "" {
		return nil, true, nil
	}
	qp, err := p.queryParams(v, str(v, "central_manager", ""), 0, []string{APIAttr})
	if err != nil {
		return nil, false, err
	}
	qp.q.Requirements = fmt.Sprintf("TARGET.PondID =?= %q", id)
	qp.q.Mode = api.BestRank
	return p.runMembers(ctx, qp)
}

// observedMembers is who belongs to pond id now: what a tree query finds,
// and, when the query cannot vouch for the whole sea or finds no one, the
// recorded members that say so themselves. gone is true when no node
// belongs to the pond any more: the whole sea answered and none of the
// recorded members says otherwise. err is why the query failed, if it did.
func (p *Provider) observedMembers(ctx context.Context, v cty.Value, id string) (members []pondMember, gone bool, err error) {
	found, complete, err := p.findMembers(ctx, v, id)
	switch {
	case err == nil && complete && len(found) > 0:
		return sortMembers(found), false, nil
	case err == nil && complete:
		live := p.liveMembers(ctx, membersOf(v), id)
		return live, len(live) == 0, nil
	}
	return sortMembers(union(found, p.liveMembers(ctx, membersOf(v), id))), false, err
}

func union(a, b []pondMember) []pondMember {
	seen := map[string]bool{}
	var out []pondMember
	for _, l := range [][]pondMember{a, b} {
		for _, m := range l {
			if !seen[m.Name] {
				seen[m.Name] = true
				out = append(out, m)
			}
		}
	}
	return out
}

func sortMembers(ms []pondMember) []pondMember {
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].Rank != ms[j].Rank {
			return ms[i].Rank > ms[j].Rank
		}
		return ms[i].Name < ms[j].Name
	})
	return ms
}

// PlanResourceChange implements providers.Provider.
func (p *Provider) PlanResourceChange(ctx context.Context, req providers.PlanRequest) providers.PlanResponse {
	if req.TypeName == "flock" {
		return p.planFlock(req)
	}
	cfg := req.ProposedNew
	m := cfg.AsValueMap()
	if req.Config.GetAttr("size").IsNull() {
		m["size"] = cty.NumberIntVal(1)
	}
	// HTCondor's clients reach the pond where its central manager's agent
	// serves CEDAR: at its API address.
	m["condor_host"] = m["central_manager"]
	planned := cty.ObjectVal(m)
	prior := req.Prior
	if !prior.IsNull() && !prior.GetAttr("central_manager").RawEquals(planned.GetAttr("central_manager")) {
		// A new central manager replaces the pond (the attribute is
		// ForceNew): plan the new one, which keeps nothing of the old.
		prior = cty.NullVal(prior.Type())
	}
	size := num(planned, "size", 1)
	current := membersOf(prior)
	needQuery := prior.IsNull() || len(current) != size || !prior.GetAttr("requirements").RawEquals(planned.GetAttr("requirements"))
	if !needQuery {
		return providers.PlanResponse{Planned: planned}
	}
	if prior.IsNull() {
		m["id"] = cty.UnknownVal(cty.String)
	}
	m["members"] = cty.UnknownVal(cty.List(cty.String))
	m["member_details"] = cty.UnknownVal(cty.List(memberType))
	m["candidates"] = cty.UnknownVal(cty.List(memberType))
	// Show who would join: query now when everything is known.
	var diags hcl.Diagnostics
	if planned.IsWhollyKnown() || (planned.GetAttr("central_manager").IsKnown() && planned.GetAttr("requirements").IsKnown()) {
		cands, complete, err := p.query(ctx, planned, str(prior, "id", ""), size)
		switch {
		case err != nil:
			p.logger.Warn("pond plan: query failed", "address", req.Address, "err", err)
			diags = append(diags, providers.Warning("No candidates for "+req.Address,
				fmt.Sprintf("The sea query that finds who would join failed, so the plan cannot show the candidates: %v. Apply queries again.", err)))
		default:
			_, details := membersValue(cands)
			m["candidates"] = details
			if !complete {
				diags = append(diags, providers.Warning("Candidates of "+req.Address+" may be missing",
					fmt.Sprintf("Part of the sea did not answer the query that finds who would join, so the plan shows %d candidate(s) of the %d wanted from the members that did. Apply queries again.", len(cands), size)))
			}
		}
	}
	return providers.PlanResponse{Planned: cty.ObjectVal(m), Diagnostics: diags}
}

// ApplyResourceChange implements providers.Provider.
func (p *Provider) ApplyResourceChange(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	if req.TypeName == "flock" {
		v, diags := p.applyFlock(ctx, req)
		return providers.ApplyResponse{New: v, Diagnostics: diags}
	}
	resp, err := p.apply(ctx, req)
	var out providers.ApplyResponse
	if resp != nil {
		out = *resp
	}
	out.Diagnostics = append(out.Diagnostics, providers.FromError(err)...)
	return out
}

func (p *Provider) apply(ctx context.Context, req providers.ApplyRequest) (*providers.ApplyResponse, error) {
	progress := req.Progress
	if progress == nil {
		progress = func(string) {}
	}
	if req.Planned.IsNull() {
		return p.deletePond(ctx, req.Prior, progress)
	}
	return p.fillPond(ctx, req.Address, req.Prior, req.Planned, progress)
}

func (p *Provider) invitation(v cty.Value, name, id string) (api.Invitation, error) {
	inv := api.Invitation{Pond: name, PondID: id, CentralManager: str(v, "central_manager", "")}
	if l := str(v, "lease", ""); l != "" {
		d, err := time.ParseDuration(l)
		if err != nil {
			return inv, fmt.Errorf("lease: %w", err)
		}
		inv.Lease = d
	}
	if ids := v.GetAttr("job_ids"); !ids.IsNull() {
		var err error
		if inv.JobIDs, err = jobIDsOf(ids); err != nil {
			return inv, fmt.Errorf("job_ids: %w", err)
		}
	}
	if a := v.GetAttr("attributes"); !a.IsNull() {
		inv.Attributes = map[string]string{}
		for k, e := range a.AsValueMap() {
			inv.Attributes[k] = e.AsString()
		}
	}
	return inv, nil
}

// drainOf is how v's members drain when released.
func drainOf(v cty.Value) api.Drain {
	d := api.Drain{Mode: str(v, "drain", api.DrainWait)}
	if t, err := time.ParseDuration(str(v, "drain_timeout", "")); err == nil && t > 0 {
		d.Timeout = t
	}
	return d
}

// describeDrain says what a member's drain did, for progress lines.
func describeDrain(r api.DrainResult) string {
	if r.Finished == 0 && r.Evicted == 0 {
		return "no job running"
	}
	return fmt.Sprintf("%d job(s) finished, %d evicted, drained in %s", r.Finished, r.Evicted, r.Took.Round(100*time.Millisecond))
}

// pondName is the name members see: the resource's address.
func pondName(address string) string { return address }

// fillPond brings the pond to its planned size: it checks who is still a
// member, invites the best candidates not yet asked until the size is met
// or the sea has no more, and releases surplus members.
func (p *Provider) fillPond(ctx context.Context, address string, prior, planned cty.Value, progress func(string)) (*providers.ApplyResponse, error) {
	id := ""
	if !prior.IsNull() {
		id = str(prior, "id", "")
	}
	if id == "" {
		id = uuid.NewString()
	}
	inv, err := p.invitation(planned, pondName(address), id)
	if err != nil {
		return nil, err
	}
	size := num(planned, "size", 1)
	minSize := num(planned, "min_size", size)
	var members []pondMember
	if !prior.IsNull() {
		members, _, _ = p.observedMembers(ctx, prior, id)
	}
	// Renew the membership of those that stay: the lease starts again,
	// and changed attributes reach them.
	addrs := make([]string, len(members))
	for i, m := range members {
		addrs[i] = m.API
	}
	grant, err := p.grant(inv)
	if err != nil {
		return nil, err
	}
	api.InviteAll(ctx, inv, addrs, grant, p.seaTLS())
	// Release surplus members, lowest rank first.
	if len(members) > size {
		sort.SliceStable(members, func(i, j int) bool { return members[i].Rank > members[j].Rank })
		if err := p.releaseMembers(ctx, members[size:], id, drainOf(planned), progress); err != nil {
			progress(err.Error())
		}
		members = members[:size]
	}
	tried := map[string]bool{}
	for _, m := range members {
		tried[m.Name] = true
	}
	var declined []string
	var cands []pondMember
	for round := 0; len(members) < size && round < 6; round++ {
		want := size - len(members)
		k := 2*want + len(tried) + 4
		var complete bool
		cands, complete, err = p.query(ctx, planned, id, k)
		if err != nil {
			return &providers.ApplyResponse{New: p.partial(planned, id, members, cands)}, fmt.Errorf("querying the sea: %w", err)
		}
		var fresh []pondMember
		for _, c := range cands {
			if !tried[c.Name] {
				fresh = append(fresh, c)
			}
		}
		if len(fresh) == 0 {
			if complete && round >= 3 {
				break
			}
			// Part of the sea did not answer (a node restarting, say), or
			// the root's view of the sea is still filling in (nodes that
			// just joined): ask again shortly rather than give up.
			if !complete {
				progress("the query did not reach every node; asking again")
			}
			select {
			case <-ctx.Done():
				return &providers.ApplyResponse{New: p.partial(planned, id, members, cands)}, ctx.Err()
			case <-time.After(time.Duration(round+1) * 500 * time.Millisecond):
			}
			continue
		}
		progress(fmt.Sprintf("query found %d candidates; inviting", len(fresh)))
		for len(members) < size && len(fresh) > 0 {
			batch := fresh[:min(size-len(members), len(fresh))]
			fresh = fresh[len(batch):]
			joined, refused := p.inviteAll(ctx, inv, grant, batch)
			for _, c := range batch {
				tried[c.Name] = true
			}
			members = append(members, joined...)
			declined = append(declined, refused...)
		}
	}
	sort.SliceStable(members, func(i, j int) bool {
		if members[i].Rank != members[j].Rank {
			return members[i].Rank > members[j].Rank
		}
		return members[i].Name < members[j].Name
	})
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.Name
	}
	msg := fmt.Sprintf("%d of %d members joined", len(members), size)
	if len(names) > 0 {
		msg += ": " + strings.Join(names, ", ")
	}
	progress(msg)
	v := p.partial(planned, id, members, cands)
	if len(members) < minSize {
		detail := ""
		if len(declined) > 0 {
			detail = "; declined: " + strings.Join(declined, ", ")
		}
		return &providers.ApplyResponse{New: v}, fmt.Errorf("pond has %d of the %d members it needs: the sea has no more matching nodes that accept%s", len(members), minSize, detail)
	}
	return &providers.ApplyResponse{New: v}, nil
}

// partial is the state of a pond planned as planned, with members, after
// a query found cands. The candidates the plan showed stay as planned (the
// applied state keeps what the plan knew); cands take their place only when
// the plan could not know them.
func (p *Provider) partial(planned cty.Value, id string, members, cands []pondMember) cty.Value {
	m := planned.AsValueMap()
	m["id"] = cty.StringVal(id)
	m["members"], m["member_details"] = membersValue(members)
	if !m["candidates"].IsWhollyKnown() {
		_, m["candidates"] = membersValue(cands)
	}
	return cty.ObjectVal(m)
}

// inviteAll invites the candidates in parallel and returns those that
// joined and, for the others, why not.
func (p *Provider) inviteAll(ctx context.Context, inv api.Invitation, grant string, cands []pondMember) (joined []pondMember, declined []string) {
	addrs := make([]string, len(cands))
	for i, c := range cands {
		addrs[i] = c.API
	}
	for i, o := range api.InviteAll(ctx, inv, addrs, grant, p.seaTLS()) {
		switch {
		case o.Err != nil:
			declined = append(declined, fmt.Sprintf("%s (%v)", cands[i].Name, o.Err))
		case !o.Reply.Accepted:
			declined = append(declined, fmt.Sprintf("%s (%s)", cands[i].Name, o.Reply.Reason))
		default:
			joined = append(joined, cands[i])
		}
	}
	sort.Strings(declined)
	return joined, declined
}

// liveMembers returns the members that still belong to pond id.
func (p *Provider) liveMembers(ctx context.Context, ms []pondMember, id string) []pondMember {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var out []pondMember
	for _, m := range ms {
		wg.Add(1)
		go func(m pondMember) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			cur, err := p.client(m.API).Membership(cctx)
			if err == nil && cur != nil && cur.PondID == id {
				mu.Lock()
				out = append(out, m)
				mu.Unlock()
			}
		}(m)
	}
	wg.Wait()
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Rank != out[j].Rank {
			return out[i].Rank > out[j].Rank
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (p *Provider) deletePond(ctx context.Context, prior cty.Value, progress func(string)) (*providers.ApplyResponse, error) {
	id := str(prior, "id", "")
	ms := membersOf(prior)
	if found, _, err := p.findMembers(ctx, prior, id); err == nil {
		ms = union(ms, found)
	}
	drain := drainOf(prior)
	how := "evicting running jobs"
	if drain.Mode == api.DrainWait {
		how = fmt.Sprintf("letting running jobs finish, up to %s", drain.Limit())
	}
	progress(fmt.Sprintf("releasing %d member(s), %s", len(ms), how))
	if err := p.releaseMembers(ctx, ms, id, drain, progress); err != nil {
		return &providers.ApplyResponse{New: prior}, err
	}
	return &providers.ApplyResponse{New: cty.NullVal(prior.Type())}, nil
}

// releaseMembers releases ms from pond id in parallel, each draining as d
// says, and reports each one back in the sea. A member that cannot be
// reached is back in the sea already.
func (p *Provider) releaseMembers(ctx context.Context, ms []pondMember, id string, d api.Drain, progress func(string)) error {
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			r, err := p.client(m.API).Release(ctx, id, d)
			switch {
			case err == nil:
				if r.Released {
					progress(fmt.Sprintf("%s back in the sea (%s)", m.Name, describeDrain(r.Drain)))
				}
			case !isUnreachable(err):
				errs[i] = fmt.Errorf("releasing %s: %w", m.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func isUnreachable(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "no route to host")
}

// ReadResource implements providers.Provider.
func (p *Provider) ReadResource(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	if req.TypeName == "flock" {
		return p.readFlock(ctx, req)
	}
	cur := req.Current
	id := str(cur, "id", "")
	live, gone, err := p.observedMembers(ctx, cur, id)
	if gone {
		// Nothing in the sea holds the pond: its members were released,
		// left or withdrew.
		return providers.ReadResponse{New: cty.NullVal(cur.Type())}
	}
	var diags hcl.Diagnostics
	if err != nil {
		p.logger.Warn("pond read: query failed", "address", req.Address, "err", err)
		diags = append(diags, providers.Warning("Members of "+req.Address+" not found by a sea query",
			fmt.Sprintf("The sea query that finds the pond's members failed (%v), so %s lists only the members in the state that still say they belong to it. Members whose central manager is gone return to the sea on their own.", err, req.Address)))
	}
	m := cur.AsValueMap()
	m["condor_host"] = m["central_manager"]
	m["members"], m["member_details"] = membersValue(live)
	return providers.ReadResponse{New: cty.ObjectVal(m), Diagnostics: diags}
}
