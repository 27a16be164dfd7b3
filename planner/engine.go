package planner

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

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
