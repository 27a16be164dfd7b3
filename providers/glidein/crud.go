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
	"github.com/pond-htc/pond/overlay/api"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
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
		d := providers.FromError(err)
		// A setting of the site (its partition) is an argument of the
		// provider block.
		if se := new(site.SettingError); errors.As(err, &se) {
			d[0].Extra = providers.ProviderAttributeRef(se.Setting)
		}
		return providers.PlanResponse{Diagnostics: d}
	}
	if _, ok := p.site.(site.Describer); isFactory(req.Config) && !ok {
		return providers.PlanResponse{Diagnostics: hcl.Diagnostics{providers.AttributeError("factory",
			fmt.Errorf("the %s provider's glideins cannot be kept by a pilot factory (its central manager starts glideins on slurm, ssh and aws sites): use nodes", p.kind))}}
	}
	ty := glideinSchema().ImpliedType()
	fact := isFactory(req.Config)
	computed := computedAttrs
	if fact {
		computed = append([]string{"entry", "funnel"}, computedAttrs...)
	}
	planned := withDefaults(req.ProposedNew, req.Config)
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

// withDefaults is v with the defaults of what config leaves out: nodes,
// slots, lifetime, idle_timeout and cm_timeout; nodes null with a factory
// block (the factory keeps the glideins: there is no count of them), and
// entry and funnel null without one.
func withDefaults(v, config cty.Value) cty.Value {
	set := map[string]cty.Value{}
	for n, def := range map[string]cty.Value{
		"nodes": cty.NumberIntVal(1), "slots": cty.NumberIntVal(1),
		"lifetime": cty.StringVal(defaultLifetime.String()), "idle_timeout": cty.StringVal(defaultIdleTimeout.String()),
		"cm_timeout": cty.StringVal(defaultCMTimeout.String()),
	} {
		if getAttr(config, n).IsNull() {
			set[n] = def
		}
	}
	if isFactory(config) {
		set["nodes"] = cty.NullVal(cty.Number)
	} else {
		set["entry"], set["funnel"] = cty.NullVal(cty.String), cty.NullVal(funnelType)
	}
	return providers.WithAttrs(v, set)
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
	for _, name := range []string{"pool", "lifetime", "idle_timeout", "cm_timeout", "max_jobs", "slots", "cpus", "memory", "attributes", "validate", "factory"} {
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
//
// A resource whose configuration has a factory block is imported from the
// pilot factory of its pool's central manager: PREFIX must then be the
// prefix of its entry's glideins (pond-POOL-ENTRY-, the resource's id);
// the state holds the configuration (the entry is what it would install),
// the entry, its funnel and the glideins the site lists, so that a plan
// shows no change, and destroy removes the entry and cancels them.
// Without one, the state holds the configuration's arguments (nodes,
// lifetime, slots, validate, ...) and the glideins the site lists, so
// that a plan shows no change when the site holds what it declares.
func (p *Provider) ImportResource(ctx context.Context, req providers.ImportRequest) providers.ImportResponse {
	if isFactory(req.Config) {
		v, diags := p.importFactory(ctx, req)
		return providers.ImportResponse{Imported: v, Diagnostics: diags}
	}
	v, err := p.importGlideins(ctx, req)
	return providers.ImportResponse{Imported: v, Diagnostics: providers.FromError(err)}
}

// importPrefix checks an import ID, KIND:PREFIX, and returns PREFIX.
func (p *Provider) importPrefix(id string) (string, error) {
	kind, prefix, ok := strings.Cut(id, ":")
	if !ok || kind != p.kind {
		return "", fmt.Errorf("import: the ID %q is not %s:PREFIX, such as %s:%sab12cd34-5e6f70-hpc-", id, p.kind, p.kind, site.IDPrefix)
	}
	if !validID(prefix) || !strings.HasSuffix(prefix, "-") || len(prefix) > maxPrefix {
		return "", fmt.Errorf("import: %q is not a glidein ID prefix: %s, then letters, digits and '-', ending with '-', at most %d characters", prefix, site.IDPrefix, maxPrefix)
	}
	return prefix, nil
}

// importFactory imports a glidein resource with a factory block: its
// entry in the factory of the central manager its configuration's pool
// names, and the glideins the site lists under the entry's prefix. The
// factory, not the provider, submitted them: they go in no journal of the
// provider (destroy cancels whatever the site lists under the prefix).
func (p *Provider) importFactory(ctx context.Context, req providers.ImportRequest) (cty.Value, hcl.Diagnostics) {
	fail := func(err error) (cty.Value, hcl.Diagnostics) { return cty.NilVal, providers.FromError(err) }
	if err := p.checkType(req.TypeName); err != nil {
		return fail(err)
	}
	if p.site == nil {
		return fail(errNoSite)
	}
	prefix, err := p.importPrefix(req.ID)
	if err != nil {
		return fail(err)
	}
	if req.Address == "" {
		return fail(errors.New("import: a glidein with a factory block is imported to an address, which names its factory entry"))
	}
	if !req.Config.IsWhollyKnown() {
		what := "its configuration"
		if !getAttr(req.Config, "pool").IsKnown() {
			what = "its pool"
		}
		return fail(fmt.Errorf("import %s: %s is not known until what it refers to is in the state: import the pool first (pondctl import pool.NAME NAME)", req.Address, what))
	}
	sp, err := specOf(req.Config)
	if err != nil {
		return cty.NilVal, diagnostics(unwrapJoin(err)...)
	}
	pool, err := p.lookupPool(ctx, sp.Pool)
	if err != nil {
		return fail(fmt.Errorf("import %s: %w", req.Address, err))
	}
	name := EntryName(req.Address)
	if want := api.FactoryPrefix(pool.name) + name + "-"; prefix != want {
		return fail(fmt.Errorf("import %s: its glideins are those of the entry %s of the pilot factory of pool %s, whose prefix is %s, not %s: import it as %s:%s", req.Address, name, pool.name, want, prefix, p.kind, want))
	}
	unlock := p.lock(prefix)
	defer unlock()
	fe, _, err := p.factoryEntry(ctx, sp.Pool, name)
	if err != nil {
		return fail(fmt.Errorf("import %s: %w", req.Address, err))
	}
	gs, err := p.site.List(ctx, prefix)
	if err != nil {
		return fail(fmt.Errorf("import %s: listing the %s site: %w", req.Address, p.kind, err))
	}
	if fe == nil && !anyLive(gs) {
		return fail(fmt.Errorf("import %s: the pilot factory of pool %s (%s) has no entry %s, and the %s site no queued or running glidein whose ID starts with %s: nothing to import", req.Address, pool.name, sp.Pool, name, p.kind, prefix))
	}
	var diags hcl.Diagnostics
	entry := cty.StringVal(name)
	switch {
	case fe == nil:
		entry = cty.NullVal(cty.String)
		diags = append(diags, providers.Warning(fmt.Sprintf("The pilot factory of pool %s has no entry %s", pool.name, name),
			fmt.Sprintf("%s is imported with the glideins the %s site lists under %s; the plan shows the entry missing, and apply installs it.", req.Address, p.kind, prefix)))
	default:
		if e, err := p.entryOf(sp, name, req.Lineage, req.Address); err != nil || !sameEntry(fe.Config, e) {
			entry = cty.NullVal(cty.String)
			diags = append(diags, providers.Warning(fmt.Sprintf("The entry %s of the pilot factory of pool %s is not the configuration's", name, pool.name),
				fmt.Sprintf("%s is imported, but its entry differs from the one the configuration would install (its limits, template or the %s provider's settings): the plan shows it, and apply installs the configuration's.", req.Address, p.kind)))
		}
	}
	base := providers.WithAttrs(withDefaults(req.Config, req.Config), map[string]cty.Value{"id": cty.StringVal(prefix), "entry": entry})
	return p.observeFactory(ctx, base, prefix, name, sp.Pool, &diags), diags
}

func (p *Provider) importGlideins(ctx context.Context, req providers.ImportRequest) (cty.Value, error) {
	if err := p.checkType(req.TypeName); err != nil {
		return cty.NilVal, err
	}
	if p.site == nil {
		return cty.NilVal, errNoSite
	}
	prefix, err := p.importPrefix(req.ID)
	if err != nil {
		return cty.NilVal, err
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
	p.useLineage(prefix, req.Lineage)
	return stateOf(importBase(req.Config, live), prefix, gs, nil), nil
}

// importBase is what the state of a glidein resource imported with live
// glideins holds besides them: the configuration's arguments (req.Config)
// with their defaults, so that a plan after the import shows no change
// when the site holds what the configuration declares; an argument whose
// value is not known yet (it refers to what the state lacks) is null, and
// the plan shows it. Without a configuration, only nodes, which is live.
func importBase(config cty.Value, live int) cty.Value {
	ty := glideinSchema().ImpliedType()
	if config != cty.NilVal && !config.IsNull() && config.IsKnown() {
		if c, err := convert.Convert(config, ty); err == nil {
			config = c
		} else {
			config = cty.NullVal(ty)
		}
	}
	m := map[string]cty.Value{}
	for n, t := range ty.AttributeTypes() {
		m[n] = cty.NullVal(t)
		if config.IsNull() || !config.IsKnown() {
			continue
		}
		if v := config.GetAttr(n); v.IsWhollyKnown() {
			m[n] = v
		}
	}
	if config.IsNull() || !config.IsKnown() {
		m["nodes"] = cty.NumberIntVal(int64(live))
		return cty.ObjectVal(m)
	}
	v := withDefaults(cty.ObjectVal(m), config)
	if getAttr(v, "nodes").IsNull() {
		// The configuration's count is not known yet: what the site has.
		v = providers.WithAttrs(v, map[string]cty.Value{"nodes": cty.NumberIntVal(int64(live))})
	}
	return v
}

func anyLive(gs []site.Glidein) bool {
	for _, g := range gs {
		if !g.State.Ended() {
			return true
		}
	}
	return false
}
