package planner

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
)

// Options configure an Engine.
type Options struct {
	Config *config.Config
	// Vars are the final values of the root variables.
	Vars map[string]cty.Value
	// Functions are the functions expressions may call.
	Functions map[string]function.Function
	// Providers maps provider type names (local, sea, aws) to factories.
	Providers map[string]providers.Factory
	// ResourceTypes and DataTypes map the managed resource and data source
	// type names to the provider type that implements them when a resource
	// names no provider.
	ResourceTypes map[string]string
	DataTypes     map[string]string
	// SeaAddr is passed to every provider's Configure.
	SeaAddr string
	Logger  *slog.Logger
	Hooks   Hooks
}

// Hooks receive progress events. Methods may be called concurrently.
type Hooks interface {
	PreRefresh(addr InstanceAddr)
	PostRefresh(addr InstanceAddr, err error)
	PreApply(addr InstanceAddr, action Action)
	Progress(addr InstanceAddr, action Action, msg string)
	PostApply(addr InstanceAddr, action Action, id string, elapsed time.Duration, err error)
}

// NopHooks ignores every event.
type NopHooks struct{}

// PreRefresh implements Hooks.
func (NopHooks) PreRefresh(InstanceAddr) {}

// PostRefresh implements Hooks.
func (NopHooks) PostRefresh(InstanceAddr, error) {}

// PreApply implements Hooks.
func (NopHooks) PreApply(InstanceAddr, Action) {}

// Progress implements Hooks.
func (NopHooks) Progress(InstanceAddr, Action, string) {}

// PostApply implements Hooks.
func (NopHooks) PostApply(InstanceAddr, Action, string, time.Duration, error) {}

// Engine plans and applies one configuration.
type Engine struct {
	opts    Options
	cfg     *config.Config
	logger  *slog.Logger
	hooks   Hooks
	managed map[string]bool

	// validateOnly makes providers answer Schema only, unconfigured.
	validateOnly bool

	mu    sync.Mutex
	provs map[string]*providerInst
}

type providerInst struct {
	key    string
	typ    string
	p      providers.Provider
	schema *providers.ProviderSchema
	once   sync.Once
	err    hcl.Diagnostics
}

// New makes an engine for a loaded configuration.
func New(opts Options) *Engine {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Hooks == nil {
		opts.Hooks = NopHooks{}
	}
	vars := make(map[string]cty.Value, len(opts.Config.Variables))
	for name, v := range opts.Config.Variables {
		if v.Default != cty.NilVal {
			vars[name] = v.Default
		}
	}
	for name, v := range opts.Vars {
		vars[name] = v
	}
	opts.Vars = vars
	e := &Engine{opts: opts, cfg: opts.Config, logger: opts.Logger, hooks: opts.Hooks, provs: map[string]*providerInst{}, managed: map[string]bool{}}
	for typ := range opts.ResourceTypes {
		e.managed[typ] = true
	}
	return e
}

// Close closes every provider the engine started.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []string
	for _, p := range e.provs {
		if p.p != nil {
			if err := p.p.Close(); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("closing providers: %s", strings.Join(errs, "; "))
	}
	return nil
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
// use.
func (e *Engine) provider(ctx context.Context, key string) (*providerInst, hcl.Diagnostics) {
	e.mu.Lock()
	pi, ok := e.provs[key]
	if !ok {
		typ, _, _ := strings.Cut(key, ".")
		pi = &providerInst{key: key, typ: typ}
		e.provs[key] = pi
	}
	e.mu.Unlock()
	pi.once.Do(func() { pi.err = e.startProvider(ctx, pi) })
	if pi.err.HasErrors() {
		return nil, pi.err
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
	err := pi.p.Configure(ctx, providers.ConfigureRequest{
		Config:  val,
		WorkDir: e.cfg.Dir,
		SeaAddr: e.opts.SeaAddr,
		Logger:  e.logger.With("provider", pi.key),
	})
	if err != nil {
		return append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Failed to configure provider " + pi.key, Detail: err.Error(), Subject: subject})
	}
	return diags
}

// resourceSchema returns the schema of a resource type in a provider.
func (pi *providerInst) resourceSchema(mode config.Mode, typ string) *providers.Schema {
	if mode == config.DataResource {
		return pi.schema.DataSources[typ]
	}
	return pi.schema.Resources[typ]
}

func errDiag(summary string, err error, subject *hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: err.Error(), Subject: subject}
}
