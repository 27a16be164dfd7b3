package glidein

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/factorycred"
	"github.com/zclconf/go-cty/cty"
)

// A glidein resource with a factory block does not keep a number of
// glideins itself: apply installs an entry (overlay/api.FactoryEntrySpec) in the
// pilot factory of the pool's central manager, which keeps as many
// glideins as the pool's idle jobs need, within the block's limits, with
// no pondctl running. Destroy removes the entry and then cancels, by ID
// and exactly once (the provider's journal), every glidein the site lists
// under the entry's prefix.

// defaultFactoryMemoryMB is the memory of each slot of a factory's
// glidein whose resource does not say: the factory matches jobs against
// it, and the glidein's startd offers it.
const defaultFactoryMemoryMB = 1024

// maxEntryName bounds the entry's name, so that the factory's glidein IDs
// (the pool's prefix, the entry, a sequence number and 8 random
// characters) stay within 64 characters.
const maxEntryName = 12

// factorySpec is a glidein resource's factory block: the entry's
// api.FactoryLimits and api.FactoryBreaker.
type factorySpec struct {
	MaxQueued         int           `json:"max_queued"`
	MaxRunning        int           `json:"max_running"`
	MaxSubmitPerCycle int           `json:"max_submit_per_cycle,omitempty"`
	Ramp              string        `json:"ramp,omitempty"`
	BreakerFailures   int           `json:"breaker_failures,omitempty"`
	BreakerWindow     time.Duration `json:"breaker_window,omitempty"`
	BreakerBackoff    time.Duration `json:"breaker_backoff,omitempty"`
}

// factorySpecOf reads a factory block; its errors are attrErrors at the
// block's argument (factory.NAME).
func factorySpecOf(b cty.Value) (*factorySpec, []error) {
	var fs factorySpec
	var errs []error
	at := func(err error) error {
		var ae *attrError
		if errors.As(err, &ae) {
			ae.attr = "factory." + ae.attr
		}
		return err
	}
	var err error
	known := true
	for _, a := range []struct {
		name string
		to   *int
		lo   int
	}{{"max_queued", &fs.MaxQueued, 0}, {"max_running", &fs.MaxRunning, 0},
		{"max_submit_per_cycle", &fs.MaxSubmitPerCycle, 1}, {"breaker_failures", &fs.BreakerFailures, 1}} {
		if *a.to, err = intAttr(b, a.name, 0, a.lo, maxNodes); err != nil {
			errs = append(errs, at(err))
			known = false
		}
	}
	if !known {
		// Unknown until plan (a variable, a value of another resource),
		// or already wrong: nothing to compare.
	} else if fs.MaxQueued > fs.MaxRunning {
		errs = append(errs, attrErr("factory.max_queued", "%d is more than max_running (%d), which counts queued glideins too", fs.MaxQueued, fs.MaxRunning))
	}
	if known && fs.MaxSubmitPerCycle > fs.MaxQueued && fs.MaxQueued > 0 {
		errs = append(errs, attrErr("factory.max_submit_per_cycle", "%d is more than max_queued (%d): a cycle submits no more than may queue", fs.MaxSubmitPerCycle, fs.MaxQueued))
	}
	fs.Ramp = getString(b, "ramp")
	switch fs.Ramp {
	case "", api.RampExponential, api.RampLinear, api.RampNone:
	default:
		errs = append(errs, attrErr("factory.ramp", "%q: want %s, %s or %s", fs.Ramp, api.RampExponential, api.RampLinear, api.RampNone))
	}
	if fs.BreakerWindow, err = durationAttr(b, "breaker_window", 0, time.Second); err != nil {
		errs = append(errs, at(err))
	}
	if fs.BreakerBackoff, err = durationAttr(b, "breaker_backoff", 0, time.Second); err != nil {
		errs = append(errs, at(err))
	}
	return &fs, errs
}

// EntryName is the name of the factory entry of the glidein resource
// instance at address: its readable name (ResourceName) in lower-case
// letters and digits, with six hex digits of the address's hash when that
// changed it or it is long. It holds no '-', so that no entry's prefix
// (pond-POOL-ENTRY-) begins another's.
func EntryName(address string) string {
	name := ResourceName(address)
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	out := b.String()
	if out == name && len(out) <= maxEntryName {
		return out
	}
	sum := sha256.Sum256([]byte(address))
	if len(out) > maxEntryName-6 {
		out = out[:maxEntryName-6]
	}
	return out + hex.EncodeToString(sum[:3])
}

// entryOf is the factory entry that keeps the glideins of sp, named name:
// the site as this provider's site describes itself, the glidein's
// template (its agent reaches the pool as this provider's glideins do:
// bind_address, gossip_profile, cm_timeout), the block's limits, and the
// state's lineage and the resource's address, with which the site labels
// the entry's glideins as it labels those this provider starts (EC2's
// tags).
func (p *Provider) entryOf(sp spec, name, lineage, address string) (api.FactoryEntrySpec, error) {
	d, ok := p.site.(site.Describer)
	if !ok {
		return api.FactoryEntrySpec{}, fmt.Errorf("the %s provider's glideins cannot be kept by a pilot factory (its central manager can start glideins on slurm, ssh and aws sites): use nodes", p.kind)
	}
	cfg, err := d.Describe()
	if err != nil {
		return api.FactoryEntrySpec{}, fmt.Errorf("describing the %s site for the factory: %w", p.kind, err)
	}
	bind := net.JoinHostPort(p.bindAddr, "0")
	t := api.FactoryTemplate{
		CPUs:        sp.CPUs,
		MemoryMB:    sp.MemoryMB,
		Lifetime:    api.Duration(sp.Lifetime),
		IdleTimeout: api.Duration(sp.IdleTimeout),
		MaxJobs:     sp.MaxJobs,
		AgentArgs: []string{"-bind", bind, "-api", bind, "-gossip-profile", p.profile,
			"-cm-timeout", sp.CMTimeout.String()},
	}
	if p.cmAddress != "" {
		// Where the glideins reach the central manager, instead of the
		// address its agent finds for itself.
		cm, _, err := reachOf(sp.Pool, sp.Pool, p.cmAddress)
		if err != nil {
			return api.FactoryEntrySpec{}, err
		}
		t.AgentArgs = append(t.AgentArgs, "-condor-host", cm)
	}
	if sp.Slots > 1 {
		t.Slots = sp.Slots
	}
	if sp.MaxInstances == 0 {
		sp.MaxInstances = p.budget.maxInstances
	}
	if sp.MaxHourlyCost == 0 {
		sp.MaxHourlyCost = p.budget.maxHourlyCost
	}
	for _, kv := range sp.Attrs {
		k, v, _ := strings.Cut(kv, "=")
		if t.Attributes == nil {
			t.Attributes = map[string]string{}
		}
		t.Attributes[k] = v
	}
	if sp.Validate != nil {
		t.Validate = sp.Validate.checks()
	}
	fs := sp.Factory
	e := api.FactoryEntrySpec{
		Name:     name,
		Site:     api.FactorySite{Kind: p.site.Kind(), Config: cfg},
		Template: t,
		Limits: api.FactoryLimits{MaxQueued: fs.MaxQueued, MaxRunning: fs.MaxRunning,
			MaxSubmitPerCycle: fs.MaxSubmitPerCycle, Ramp: fs.Ramp,
			// The resource's budget, else the provider's: the factory
			// keeps it for the entry's glideins at each submission.
			MaxInstances: sp.MaxInstances, MaxHourlyCost: sp.MaxHourlyCost},
		Breaker: api.FactoryBreaker{Failures: fs.BreakerFailures, Window: api.Duration(fs.BreakerWindow),
			Backoff: api.Duration(fs.BreakerBackoff)},
	}
	if p.k.Labels {
		// Only EC2 records them, as tags: an entry of another site stays
		// the same when its glideins are imported into a new state.
		e.Lineage, e.Address = lineage, address
	}
	if err := e.Validate(); err != nil {
		return api.FactoryEntrySpec{}, err
	}
	return e, nil
}

// sameEntry reports whether the entry a central manager shows (as GET
// /v1/factory answers it) is e.
func sameEntry(shown any, e api.FactoryEntrySpec) bool {
	data, err := json.Marshal(shown)
	if err != nil {
		return false
	}
	got, err := api.ParseFactoryEntry(data)
	if err != nil {
		return false
	}
	return canonical(got) == canonical(e)
}

// canonical is e in JSON with its site's configuration in a canonical
// form (objects' keys in order), as the site's own order is lost when
// the entry travels as a generic value.
func canonical(e api.FactoryEntrySpec) string {
	var cfg any
	if len(e.Site.Config) > 0 {
		if err := json.Unmarshal(e.Site.Config, &cfg); err != nil {
			return ""
		}
		e.Site.Config, _ = json.Marshal(cfg)
	}
	data, _ := json.Marshal(e)
	return string(data)
}

// adminClient returns a client of the agent API at addr presenting a
// short-lived administrator's token of the authority: setting and
// removing factory entries takes SEA_ADMIN.
func (p *Provider) adminClient(addr string) (*api.Client, error) {
	a, err := p.authority()
	if err != nil {
		return nil, err
	}
	tok, err := a.Mint("pondctl", []auth.Scope{auth.SeaAdmin}, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	return api.NewClient(addr).WithTLS(p.tls.Config(p.workDir)).WithToken(tok), nil
}

// factoryEntry returns the entry name of the factory of the central
// manager at cm, nil when it has none, and the factory's status.
func (p *Provider) factoryEntry(ctx context.Context, cm, name string) (*api.FactoryEntry, *api.FactoryStatus, error) {
	c, err := p.client(cm)
	if err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.Factory(cctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the pilot factory of the central manager at %s: %w", cm, err)
	}
	for i := range st.Entries {
		if st.Entries[i].Name == name {
			return &st.Entries[i], st, nil
		}
	}
	return nil, st, nil
}

// funnelOf is the funnel attribute of entry fe of the factory st; null
// when the factory has no such entry.
func funnelOf(fe *api.FactoryEntry, st *api.FactoryStatus) cty.Value {
	if fe == nil {
		return cty.NullVal(funnelType)
	}
	n := func(i int) cty.Value { return cty.NumberIntVal(int64(i)) }
	f := fe.Funnel
	until := ""
	if fe.Breaker.Open {
		until = fe.Breaker.Until.UTC().Format(time.RFC3339)
	}
	errText := fe.Error
	if errText == "" && st != nil {
		errText = st.Error
	}
	return cty.ObjectVal(map[string]cty.Value{
		"requested": n(f.Requested), "queued": n(f.Queued), "running": n(f.Running), "validated": n(f.Validated),
		"joined": n(f.Joined), "claimed": n(f.Claimed), "failed": n(f.Failed), "lost": n(f.Lost), "done": n(f.Done),
		"idle_jobs": n(st.IdleJobs), "matched": n(fe.Matched), "wanted": n(fe.Wanted),
		"breaker_open": cty.BoolVal(fe.Breaker.Open), "breaker_reason": cty.StringVal(fe.Breaker.Reason),
		"breaker_until": cty.StringVal(until), "error": cty.StringVal(errText), "capped": cty.StringVal(fe.Capped),
	})
}

// isFactory reports whether a glidein resource's value (configuration,
// plan or state) has a factory block.
func isFactory(v cty.Value) bool {
	return !v.IsNull() && v.IsKnown() && !getAttr(v, "factory").IsNull()
}

// applyFactory installs or updates the entry of the resource at address
// in the factory of its pool's central manager, after removing what a
// prior state of it had elsewhere (glideins it kept itself, or an entry
// in another pool's factory).
func (p *Provider) applyFactory(ctx context.Context, req providers.ApplyRequest, sp spec, progress func(string)) providers.ApplyResponse {
	fail := func(err error) providers.ApplyResponse {
		return providers.ApplyResponse{New: req.Prior, Diagnostics: providers.FromError(fmt.Errorf("%s: %w", req.Address, err))}
	}
	pool, err := p.lookupPool(ctx, sp.Pool)
	if err != nil {
		return fail(err)
	}
	name := EntryName(req.Address)
	prefix := api.FactoryPrefix(pool.name) + name + "-"
	if old := getString(req.Prior, "id"); old != "" && old != prefix {
		// The glideins of what the resource was: kept by itself (nodes),
		// or by another pool's factory.
		unlock := p.lock(old)
		err := p.destroyPrior(ctx, req.Address, req.Prior, old, progress)
		unlock()
		if err != nil {
			return fail(err)
		}
	}
	unlock := p.lock(prefix)
	defer unlock()
	e, err := p.entryOf(sp, name, req.Lineage, req.Address)
	if err != nil {
		return fail(err)
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return fail(err)
	}
	c, err := p.adminClient(pool.cm)
	if err != nil {
		return fail(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	// A central manager started before the pool had a factory has no
	// credentials to sign and certify glideins with: it is given them
	// here, as it would be at its next launch, with no restart.
	sent, err := factorycred.Ensure(cctx, p.workDir, pool.name, c)
	if err == nil {
		if sent {
			progress(fmt.Sprintf("the pilot factory of pool %s given its delegated key and CA", pool.name))
		}
		err = c.SetFactoryEntry(cctx, name, raw)
	}
	cancel()
	if err != nil {
		return fail(fmt.Errorf("installing the entry %s in the pilot factory of pool %s (%s): %w", name, pool.name, pool.cm, err))
	}
	progress(fmt.Sprintf("entry %s installed in the pilot factory of pool %s", name, pool.name))
	base := providers.WithAttrs(req.Planned, map[string]cty.Value{"id": cty.StringVal(prefix), "entry": cty.StringVal(name)})
	return providers.ApplyResponse{New: p.observeFactory(ctx, base, prefix, name, sp.Pool, nil)}
}

// observeFactory is base with what the site lists under prefix and the
// funnel of entry name in the factory of the central manager at cm. A
// site or factory that does not answer leaves those attributes as they
// are in base, known or not, with a warning in *diags.
func (p *Provider) observeFactory(ctx context.Context, base cty.Value, prefix, name, cm string, diags *hcl.Diagnostics) cty.Value {
	warn := func(err error) {
		if diags != nil {
			*diags = append(*diags, providers.Warning("Cannot observe the glideins' factory", err.Error()))
		}
	}
	set := map[string]cty.Value{}
	if gs, err := p.site.List(ctx, prefix); err == nil {
		v := stateOf(base, prefix, gs, nil)
		for _, n := range computedAttrs {
			set[n] = v.GetAttr(n)
		}
	} else {
		warn(fmt.Errorf("listing the %s site: %w", p.kind, err))
	}
	if fe, st, err := p.factoryEntry(ctx, cm, name); err == nil {
		set["funnel"] = funnelOf(fe, st)
	} else {
		warn(err)
	}
	out := providers.WithAttrs(base, set)
	for _, n := range append([]string{"funnel"}, computedAttrs...) {
		if !out.GetAttr(n).IsKnown() {
			// Unknown is for plans only: what could not be seen is none.
			out = providers.WithAttrs(out, map[string]cty.Value{n: cty.NullVal(out.Type().AttributeType(n))})
		}
	}
	return out
}

// destroyPrior removes what the prior state of a resource had under
// prefix: the entry in its pool's factory, if it had one, then every
// glidein the site lists under prefix.
func (p *Provider) destroyPrior(ctx context.Context, address string, prior cty.Value, prefix string, progress func(string)) error {
	if getString(prior, "entry") != "" || isFactory(prior) {
		if err := p.removeEntry(ctx, getString(prior, "pool"), EntryName(address), progress); err != nil {
			return err
		}
	}
	return p.destroy(ctx, prefix, progress)
}

// removeEntry removes entry name from the factory of the central manager
// at cm. Once it returns, the factory submits no more glideins for it. A
// central manager that is gone (its address refuses connections) has no
// factory left to remove it from.
func (p *Provider) removeEntry(ctx context.Context, cm, name string, progress func(string)) error {
	if cm == "" {
		return nil
	}
	c, err := p.adminClient(cm)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = c.RemoveFactoryEntry(cctx, name)
	switch {
	case err == nil:
		progress(fmt.Sprintf("entry %s removed from the pilot factory at %s", name, cm))
		return nil
	case errors.Is(err, syscall.ECONNREFUSED):
		progress(fmt.Sprintf("the central manager at %s is gone, and its factory with it", cm))
		return nil
	}
	return fmt.Errorf("removing the entry %s from the pilot factory at %s: %w", name, cm, err)
}

// readFactory is ReadResource for a resource with a factory block: the
// glideins its site lists, the entry's funnel, and drift: an entry the
// central manager no longer has, or has changed, leaves entry null, which
// the next plan shows as a change and apply installs again.
func (p *Provider) readFactory(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	cur := req.Current
	prefix, cm := getString(cur, "id"), getString(cur, "pool")
	name := EntryName(req.Address)
	var diags hcl.Diagnostics
	out := p.observeFactory(ctx, cur, prefix, name, cm, &diags)
	fe, _, err := p.factoryEntry(ctx, cm, name)
	if err != nil {
		return providers.ReadResponse{New: out, Diagnostics: diags}
	}
	why := ""
	if fe == nil {
		why = fmt.Sprintf("The pilot factory of the central manager at %s has no entry %s: it was removed behind pond's back. Its glideins are no longer replaced; apply installs the entry again.", cm, name)
	} else if sp, err := specOf(cur); err == nil && sp.Factory != nil {
		if e, err := p.entryOf(sp, name, req.Lineage, req.Address); err == nil && !sameEntry(fe.Config, e) {
			why = fmt.Sprintf("The entry %s of the pilot factory at %s is not the one pond would install: it was changed behind pond's back (or the %s provider's settings changed); apply installs pond's again.", name, cm, p.kind)
		}
	}
	if why != "" {
		out = providers.WithAttrs(out, map[string]cty.Value{"entry": cty.NullVal(cty.String)})
		diags = append(diags, providers.Warning(fmt.Sprintf("The factory entry of %s drifted", req.Address), why))
	}
	return providers.ReadResponse{New: out, Diagnostics: diags}
}
