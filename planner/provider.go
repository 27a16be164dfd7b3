package planner

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

type providerInst struct {
	key    string
	typ    string
	p      providers.Provider
	schema *providers.ProviderSchema
	once   sync.Once
	// diags are those of starting the provider.
	diags hcl.Diagnostics
}

// providerKeyFor returns the provider key a resource uses.
func (e *Engine) providerKeyFor(r *config.Resource) (string, hcl.Diagnostics) {
	if r.ProviderRef != nil {
		key := r.ProviderRef.Key()
		if _, ok := e.cfg.Providers[key]; ok {
			return key, nil
		}
		if r.ProviderRef.Alias == "" {
			if _, ok := e.opts.Providers[r.ProviderRef.Name]; ok {
				return key, nil
			}
		}
		return "", hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Reference to undeclared provider",
			Detail:   fmt.Sprintf("There is no provider configuration %q. Declare it with a provider block, or use one of: %s.", "provider."+key, strings.Join(e.providerNames(), ", ")),
			Subject:  r.ProviderRef.Range.Ptr(),
		}}
	}
	defaults := e.opts.ResourceTypes
	if r.Mode == config.DataResource {
		defaults = e.opts.DataTypes
	}
	name, ok := defaults[r.Type]
	if !ok {
		return "", hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Unsupported resource type",
			Detail:   fmt.Sprintf("No provider implements the resource type %q.", r.Type),
			Subject:  r.TypeRange.Ptr(),
		}}
	}
	return name, nil
}

func (e *Engine) providerNames() []string {
	var out []string
	for n := range e.opts.Providers {
		out = append(out, "provider."+n)
	}
	for k := range e.cfg.Providers {
		if strings.Contains(k, ".") {
			out = append(out, "provider."+k)
		}
	}
	sort.Strings(out)
	return out
}

// provider returns the configured provider for key, starting it on first
// use. The diagnostics of starting it are returned by every call when they
// hold errors, and by the first only when they are warnings.
func (e *Engine) provider(ctx context.Context, key string) (*providerInst, hcl.Diagnostics) {
	e.mu.Lock()
	pi, ok := e.provs[key]
	if !ok {
		typ, _, _ := strings.Cut(key, ".")
		pi = &providerInst{key: key, typ: typ}
		e.provs[key] = pi
	}
	e.mu.Unlock()
	first := false
	pi.once.Do(func() {
		pi.diags = e.startProvider(ctx, pi)
		first = true
	})
	switch {
	case pi.diags.HasErrors():
		return nil, pi.diags
	case first:
		return pi, pi.diags
	}
	return pi, nil
}

func (e *Engine) startProvider(ctx context.Context, pi *providerInst) hcl.Diagnostics {
	f, ok := e.opts.Providers[pi.typ]
	if !ok {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unknown provider", Detail: fmt.Sprintf("There is no provider named %q; available: %s.", pi.typ, strings.Join(e.providerNames(), ", "))}}
	}
	pi.p = f()
	pi.schema = pi.p.Schema()
	body := hcl.EmptyBody()
	var subject *hcl.Range
	if pc, ok := e.cfg.Providers[pi.key]; ok {
		body = pc.Config
		subject = pc.DeclRange.Ptr()
	}
	if e.validateOnly {
		return nil
	}
	spec := pi.schema.Provider.DecoderSpec()
	sc := newScope(e.cfg, e.opts.Vars, e.opts.Functions, e.managed)
	ectx, diags := sc.evalContext(hcldec.Variables(body, spec), nil)
	if diags.HasErrors() {
		return diags
	}
	val, d := hcldec.Decode(body, spec, ectx)
	diags = append(diags, d...)
	if diags.HasErrors() {
		return diags
	}
	e.logger.Debug("configuring provider", "provider", pi.key, "work_dir", e.cfg.Dir, "sea", e.opts.SeaAddr)
	resp := pi.p.Configure(ctx, providers.ConfigureRequest{
		Config:  unmarkForProvider(val),
		WorkDir: e.cfg.Dir,
		SeaAddr: e.opts.SeaAddr,
		Logger:  e.logger.With("provider", pi.key),
		HashKey: e.hashKey,
		// A copy: a provider may not change what the others are given.
		FactoryPools: slices.Clone(e.opts.FactoryPools),
	})
	return append(diags, atAttributes(providerDiags(resp.Diagnostics, "Failed to configure provider "+pi.key, subject), body)...)
}

// resourceSchema returns the schema of a resource type in a provider.
func (pi *providerInst) resourceSchema(mode config.Mode, typ string) *providers.Schema {
	if mode == config.DataResource {
		return pi.schema.DataSources[typ]
	}
	return pi.schema.Resources[typ]
}

// providerKeyOfState turns a state provider string (provider.local.alias)
// into a provider key (local.alias).
func providerKeyOfState(s string) string { return strings.TrimPrefix(s, "provider.") }

// providerForState returns the provider and schema for a resource recorded
// in state.
func (e *Engine) providerForState(ctx context.Context, r *state.Resource) (*providerInst, *providers.Schema, hcl.Diagnostics) {
	pi, d := e.provider(ctx, providerKeyOfState(r.Provider))
	if d.HasErrors() {
		return nil, nil, d
	}
	m := config.ManagedResource
	if r.Mode == state.ModeData {
		m = config.DataResource
	}
	schema := pi.resourceSchema(m, r.Type)
	if schema == nil {
		return nil, nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unsupported resource type in state", Detail: fmt.Sprintf("The provider %q no longer supports %q, recorded in state.", pi.key, r.Type)}}
	}
	return pi, schema, nil
}

// Schemas returns the schema of every provider the engine knows, by
// provider type name, without configuring any.
func Schemas(factories map[string]providers.Factory) map[string]*providers.ProviderSchema {
	out := map[string]*providers.ProviderSchema{}
	for name, f := range factories {
		p := f()
		out[name] = p.Schema()
		_ = p.Close()
	}
	return out
}
