package glidein

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

var computedAttrs = []string{"ids", "glideins", "counts"}

// maxPrefix is the longest ID prefix: an ID adds an index and a random
// part (at most 12 characters) and must stay within 64.
const maxPrefix = 52

func (p *Provider) checkType(typeName string) error {
	if typeName != ResourceType {
		return fmt.Errorf("%s provider: no resource type %q", p.kind, typeName)
	}
	return nil
}

// ValidateResourceConfig implements providers.Provider: durations, ranges,
// sizes and the pool's address, each at its argument. Unknown values are
// accepted.
func (p *Provider) ValidateResourceConfig(ctx context.Context, req providers.ValidateRequest) providers.ValidateResponse {
	if err := p.checkType(req.TypeName); err != nil {
		return providers.ValidateResponse{Diagnostics: providers.FromError(err)}
	}
	_, err := specOf(req.Config)
	_, berr := budgetOf(req.Config)
	err = errors.Join(err, berr)
	var diags hcl.Diagnostics
	for _, e := range unwrapJoin(err) {
		if strings.HasSuffix(e.Error(), "not known") {
			continue
		}
		diags = append(diags, diagnostics(e)...)
	}
	return providers.ValidateResponse{Diagnostics: diags}
}

// unwrapJoin returns the errors errors.Join joined into err.
func unwrapJoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unwrapJoin(e)...)
		}
		return out
	}
	return []error{err}
}

// PlanResourceChange implements providers.Provider.
func (p *Provider) PlanResourceChange(ctx context.Context, req providers.PlanRequest) providers.PlanResponse {
	if err := p.checkType(req.TypeName); err != nil {
		return providers.PlanResponse{Diagnostics: providers.FromError(err)}
	}
	if req.ProposedNew.IsNull() {
		return providers.PlanResponse{Planned: req.ProposedNew}
	}
	var diags hcl.Diagnostics
	for _, sp := range req.Sensitive {
		name := "the configuration"
		if len(sp) > 0 {
			if a, ok := sp[0].(cty.GetAttrStep); ok {
				name = a.Name
			}
		}
		diags = append(diags, providers.AttributeError(name, fmt.Errorf("%s holds a sensitive value, which would be shown to anyone on the site (on the glideins' command line or in their machine ad)", name)))
	}
	if diags.HasErrors() {
		return providers.PlanResponse{Diagnostics: diags}
	}
	if err := p.checkSite(ctx); err != nil {
		return providers.PlanResponse{Diagnostics: providers.FromError(err)}
	}
	if _, ok := p.site.(site.Describer); isFactory(req.Config) && !ok {
		return providers.PlanResponse{Diagnostics: hcl.Diagnostics{providers.AttributeError("factory",
			fmt.Errorf("the %s provider's glideins cannot be kept by a pilot factory (its central manager starts glideins on slurm, ssh and aws sites): use nodes", p.kind))}}
	}
	ty := glideinSchema().ImpliedType()
	set := map[string]cty.Value{}
	// Defaults apply whenever the configuration leaves an argument out.
	fact := isFactory(req.Config)
	for n, def := range map[string]cty.Value{
		"nodes": cty.NumberIntVal(1), "slots": cty.NumberIntVal(1),
		"lifetime": cty.StringVal(defaultLifetime.String()), "idle_timeout": cty.StringVal(defaultIdleTimeout.String()),
		"cm_timeout": cty.StringVal(defaultCMTimeout.String()),
	} {
		if getAttr(req.Config, n).IsNull() {
			set[n] = def
		}
	}
	computed := computedAttrs
	if fact {
		// The factory keeps the glideins: there is no count of them.
		set["nodes"] = cty.NullVal(cty.Number)
		computed = append([]string{"entry", "funnel"}, computedAttrs...)
	} else {
		set["entry"], set["funnel"] = cty.NullVal(cty.String), cty.NullVal(funnelType)
	}
	planned := providers.WithAttrs(req.ProposedNew, set)
	if req.Prior.IsNull() {
		unk := map[string]cty.Value{"id": cty.UnknownVal(cty.String)}
		for _, n := range computed {
			unk[n] = cty.UnknownVal(ty.AttributeType(n))
		}
		planned = providers.WithAttrs(planned, unk)
	} else if p.changes(req.Prior, planned) {
		unk := map[string]cty.Value{}
		if fact != isFactory(req.Prior) {
			unk["id"] = cty.UnknownVal(cty.String)
		}
		for _, n := range computed {
			unk[n] = cty.UnknownVal(ty.AttributeType(n))
		}
		planned = providers.WithAttrs(planned, unk)
	}
	if !fact && (planned.IsWhollyKnown() || getAttr(planned, "lifetime").IsKnown()) {
		if sp, err := specOf(planned); err == nil {
			if w := p.credentialWarning(sp.Lifetime); w != "" {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning,
					Summary: "Glidein credentials expire before the glideins' lifetime", Detail: req.Address + ": " + w,
					Extra: providers.AttributeRef("lifetime")})
			}
		}
	}
	cost, d := p.planCost(ctx, req, planned)
	diags = append(diags, d...)
	return providers.PlanResponse{Planned: planned, Diagnostics: diags, Cost: cost}
}

// changes reports whether applying planned over prior submits or cancels
// glideins: the number of live ones differs from nodes, or the spec
// changed (its glideins are replaced).
func (p *Provider) changes(prior, planned cty.Value) bool {
	if isFactory(prior) != isFactory(planned) {
		return true
	}
	if isFactory(planned) {
		// The factory keeps the glideins; the entry must be there as
		// installed (a refresh that found it gone or changed made it null).
		if getAttr(prior, "entry").IsNull() {
			return true
		}
	} else {
		ids := getAttr(prior, "ids")
		nodes := getAttr(planned, "nodes")
		if !nodes.IsKnown() || ids.IsNull() || !ids.IsKnown() {
			return true
		}
		n, err := intAttr(planned, "nodes", 1, 0, maxNodes)
		if err != nil || ids.LengthInt() != n {
			return true
		}
	}
	for _, name := range []string{"pool", "lifetime", "idle_timeout", "cm_timeout", "slots", "cpus", "memory", "attributes", "validate", "factory"} {
		a, b := getAttr(prior, name), getAttr(planned, name)
		if !b.IsWhollyKnown() {
			return true
		}
		if a.IsNull() && name == "pool" {
			// Imported: the configuration names the pool it joined.
			continue
		}
		if !a.RawEquals(b) && !(a.IsNull() && b.IsNull()) {
			return true
		}
	}
	return false
}

// ApplyResourceChange implements providers.Provider.
func (p *Provider) ApplyResourceChange(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	if err := p.checkType(req.TypeName); err != nil {
		return providers.ApplyResponse{Diagnostics: providers.FromError(err)}
	}
	if p.site == nil {
		return providers.ApplyResponse{Diagnostics: providers.FromError(errNoSite)}
	}
	progress := req.Progress
	if progress == nil {
		progress = func(string) {}
	}
	prefix := ""
	if id := getAttr(req.Prior, "id"); !id.IsNull() && id.IsKnown() {
		prefix = id.AsString()
	}
	if prefix != "" && (req.Planned.IsNull() || !isFactory(req.Planned)) && (isFactory(req.Prior) || !getAttr(req.Prior, "entry").IsNull()) {
		// The factory kept its glideins: its entry goes first, so that it
		// submits no more, then every glidein of its prefix.
		unlock := p.lock(prefix)
		err := p.destroyPrior(ctx, req.Address, req.Prior, prefix, progress)
		unlock()
		if err != nil {
			return providers.ApplyResponse{New: p.observed(ctx, req.Prior, prefix), Diagnostics: providers.FromError(fmt.Errorf("%s: %w", req.Address, err))}
		}
		if req.Planned.IsNull() {
			return providers.ApplyResponse{New: cty.NullVal(glideinSchema().ImpliedType())}
		}
		prefix = "" // nodes from now on, under a prefix of their own
	}
	if !req.Planned.IsNull() && isFactory(req.Planned) {
		sp, err := specOf(req.Planned)
		if err != nil {
			return providers.ApplyResponse{Diagnostics: diagnostics(unwrapJoin(err)...)}
		}
		return p.applyFactory(ctx, req, sp, progress)
	}
	if prefix == "" {
		var err error
		if prefix, err = p.prefixFor(req.Address); err != nil {
			return providers.ApplyResponse{Diagnostics: providers.FromError(err)}
		}
	}
	unlock := p.lock(prefix)
	defer unlock()
	p.useLineage(prefix, req.Lineage)
	if req.Planned.IsNull() {
		err := p.destroy(ctx, prefix, progress)
		if err != nil {
			// What is left stays in state, so that it is not lost.
			return providers.ApplyResponse{New: p.observed(ctx, req.Prior, prefix), Diagnostics: providers.FromError(err)}
		}
		return providers.ApplyResponse{New: cty.NullVal(glideinSchema().ImpliedType())}
	}
	sp, err := specOf(req.Planned)
	if err != nil {
		return providers.ApplyResponse{Diagnostics: diagnostics(unwrapJoin(err)...)}
	}
	base := providers.WithAttrs(req.Planned, map[string]cty.Value{"id": cty.StringVal(prefix)})
	gs, err := p.converge(ctx, req.Address, prefix, sp, progress)
	out := providers.ApplyResponse{New: stateOf(base, prefix, gs, nil)}
	if err != nil {
		out.Diagnostics = providers.FromError(fmt.Errorf("%s: %w", req.Address, err))
	}
	if w := queuedWarning(req.Address, gs); w != nil {
		out.Diagnostics = append(out.Diagnostics, w)
	}
	return out
}

// queuedWarning tells of glideins apply left queued.
func queuedWarning(address string, gs []site.Glidein) *hcl.Diagnostic {
	n := 0
	for _, g := range gs {
		if g.State == site.Queued {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return providers.Warning(fmt.Sprintf("%d glideins of %s are still queued", n, address),
		"The site has not started them yet; they join the pool when it does. `pondctl refresh` and `pondctl show` tell their state.")
}

// observed is the state of the resource as the site shows it now, for a
// failed apply or destroy: base with the glideins the site lists.
func (p *Provider) observed(ctx context.Context, base cty.Value, prefix string) cty.Value {
	if base.IsNull() {
		return base
	}
	gs, err := p.list(ctx, prefix)
	if err != nil {
		return base
	}
	return stateOf(base, prefix, gs, nil)
}

// stateOf builds the resource's state from its configuration-derived
// attributes in base and the glideins gs of the site: ids are the live
// ones, by index; glideins lists them, and those of keepEnded that ended
// (the drift a refresh shows), but not every glidein the site remembers
// (Slurm's accounting keeps them for months).
func stateOf(base cty.Value, prefix string, gs []site.Glidein, keepEnded map[string]bool) cty.Value {
	gs = slices.DeleteFunc(slices.Clone(gs), func(g site.Glidein) bool { return g.State.Ended() && !keepEnded[g.ID] })
	sort.SliceStable(gs, func(a, b int) bool {
		la, lb := !gs[a].State.Ended(), !gs[b].State.Ended()
		if la != lb {
			return la
		}
		ia, ib := indexOf(prefix, gs[a].ID), indexOf(prefix, gs[b].ID)
		if ia != ib {
			return ia < ib
		}
		return gs[a].ID < gs[b].ID
	})
	ids := []cty.Value{}
	list := []cty.Value{}
	counts := map[string]int{}
	for _, s := range []site.State{site.Queued, site.Running, site.Done, site.Failed, site.Cancelled} {
		counts[string(s)] = 0
	}
	for _, g := range gs {
		if !g.State.Ended() {
			ids = append(ids, cty.StringVal(g.ID))
		}
		counts[string(g.State)]++
		list = append(list, cty.ObjectVal(map[string]cty.Value{
			"id": cty.StringVal(g.ID), "site_id": cty.StringVal(g.SiteID),
			"host": cty.StringVal(g.Host), "state": cty.StringVal(string(g.State)),
		}))
	}
	cm := map[string]cty.Value{}
	for k, n := range counts {
		cm[k] = cty.NumberIntVal(int64(n))
	}
	set := map[string]cty.Value{
		"id":       cty.StringVal(prefix),
		"ids":      cty.ListValEmpty(cty.String),
		"glideins": cty.ListValEmpty(glideinType),
		"counts":   cty.MapVal(cm),
	}
	if len(ids) > 0 {
		set["ids"] = cty.ListVal(ids)
	}
	if len(list) > 0 {
		set["glideins"] = cty.ListVal(list)
	}
	return providers.WithAttrs(base, set)
}

// ReadResource implements providers.Provider: the glideins the site lists
// under the resource's prefix. Glideins ended behind pond's back (scancel,
// kill) drop out of ids, which the next plan shows as a change, and a
// warning names them; apply replaces them.
func (p *Provider) ReadResource(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	if err := p.checkType(req.TypeName); err != nil {
		return providers.ReadResponse{Diagnostics: providers.FromError(err)}
	}
	if req.Current.IsNull() {
		return providers.ReadResponse{New: req.Current}
	}
	if p.site == nil {
		return providers.ReadResponse{Diagnostics: providers.FromError(errNoSite)}
	}
	prefix := getString(req.Current, "id")
	if prefix == "" {
		return providers.ReadResponse{New: req.Current}
	}
	if isFactory(req.Current) {
		return p.readFactory(ctx, req)
	}
	p.useLineage(prefix, req.Lineage)
	gs, err := p.list(ctx, prefix)
	if err != nil {
		return providers.ReadResponse{Diagnostics: providers.FromError(fmt.Errorf("%s: listing the %s site: %w", req.Address, p.kind, err))}
	}
	recs, err := p.journal.list(prefix)
	if err != nil {
		return providers.ReadResponse{Diagnostics: providers.FromError(err)}
	}
	if len(recs) == 0 && !anyLive(gs) {
		// Destroyed, or forgotten with nothing left on the site.
		return providers.ReadResponse{New: cty.NullVal(req.Current.Type())}
	}
	var gone []string
	was := map[string]bool{}
	if ids := getAttr(req.Current, "ids"); !ids.IsNull() && ids.IsWhollyKnown() {
		for _, v := range ids.AsValueSlice() {
			was[v.AsString()] = true
		}
	}
	drift := map[string]bool{}
	for _, g := range gs {
		if was[g.ID] && g.State.Ended() {
			drift[g.ID] = true
			why := string(g.State)
			if g.Reason != "" {
				why += ": " + g.Reason
			}
			gone = append(gone, fmt.Sprintf("%s (%s)", g.ID, why))
		}
		delete(was, g.ID)
	}
	for id := range was {
		gone = append(gone, id+" (no longer on the site)")
	}
	resp := providers.ReadResponse{New: stateOf(req.Current, prefix, gs, drift)}
	if len(gone) > 0 {
		sort.Strings(gone)
		resp.Diagnostics = hcl.Diagnostics{providers.Warning(
			fmt.Sprintf("%d glideins of %s ended", len(gone), req.Address),
			fmt.Sprintf("Ended or gone: %s. The plan shows what changed; apply replaces them.", strings.Join(gone, ", ")))}
	}
	return resp
}

// ImportResource implements providers.Provider. The ID is KIND:PREFIX,
// such as slurm:pond-ab12cd34-5e6f70-hpc-: the glideins the site lists
// under PREFIX, which must end with '-', are adopted into the journal.
func (p *Provider) ImportResource(ctx context.Context, req providers.ImportRequest) providers.ImportResponse {
	v, err := p.importGlideins(ctx, req)
	return providers.ImportResponse{Imported: v, Diagnostics: providers.FromError(err)}
}

func (p *Provider) importGlideins(ctx context.Context, req providers.ImportRequest) (cty.Value, error) {
	if err := p.checkType(req.TypeName); err != nil {
		return cty.NilVal, err
	}
	if p.site == nil {
		return cty.NilVal, errNoSite
	}
	kind, prefix, ok := strings.Cut(req.ID, ":")
	if !ok || kind != p.kind {
		return cty.NilVal, fmt.Errorf("import: the ID %q is not %s:PREFIX, such as %s:%sab12cd34-5e6f70-hpc-", req.ID, p.kind, p.kind, site.IDPrefix)
	}
	if !validID(prefix) || !strings.HasSuffix(prefix, "-") || len(prefix) > maxPrefix {
		return cty.NilVal, fmt.Errorf("import: %q is not a glidein ID prefix: %s, then letters, digits and '-', ending with '-', at most %d characters", prefix, site.IDPrefix, maxPrefix)
	}
	unlock := p.lock(prefix)
	defer unlock()
	gs, err := p.site.List(ctx, prefix)
	if err != nil {
		return cty.NilVal, fmt.Errorf("import: listing the %s site: %w", p.kind, err)
	}
	recs, err := p.journal.list(prefix)
	if err != nil {
		return cty.NilVal, err
	}
	known := map[string]bool{}
	for _, r := range recs {
		known[r.ID] = true
	}
	live := 0
	used := map[int]bool{}
	for _, g := range gs {
		if g.State.Ended() {
			continue
		}
		live++
		if known[g.ID] {
			continue
		}
		idx := indexOf(prefix, g.ID)
		if idx < 0 || used[idx] {
			idx = 0
			for used[idx] {
				idx++
			}
		}
		used[idx] = true
		r := &record{ID: g.ID, Prefix: prefix, Index: idx, State: recSubmitted, SiteID: g.SiteID, Host: g.Host,
			Adopted: true, Created: time.Now().UTC()}
		if err := p.journal.write(r); err != nil {
			return cty.NilVal, err
		}
	}
	if live == 0 {
		return cty.NilVal, fmt.Errorf("import: the %s site has no queued or running glidein whose ID starts with %s", p.kind, prefix)
	}
	ty := glideinSchema().ImpliedType()
	m := map[string]cty.Value{}
	for n, t := range ty.AttributeTypes() {
		m[n] = cty.NullVal(t)
	}
	m["nodes"] = cty.NumberIntVal(int64(live))
	return stateOf(cty.ObjectVal(m), prefix, gs, nil), nil
}

func anyLive(gs []site.Glidein) bool {
	for _, g := range gs {
		if !g.State.Ended() {
			return true
		}
	}
	return false
}
