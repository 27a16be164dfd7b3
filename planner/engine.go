package planner

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/planner/marks"
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
	// FactoryPools is passed to every provider's Configure (see
	// providers.ConfigureRequest).
	FactoryPools []string
	Logger       *slog.Logger
	Hooks        Hooks
	// HashKey returns the key of the keyed hashes the state keeps of
	// sensitive values (see providers.HashKey); it is called the first
	// time a sensitive value is stored or compared. Without it, the engine
	// makes a key of its own, which no later run has.
	HashKey func() ([]byte, error)
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
	// lineage is the lineage of the state worked on (useLineage).
	lineage string

	keyOnce sync.Once
	key     []byte
	keyErr  error
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
	// A sensitive variable's value is marked, and so is everything
	// computed from it.
	for name, v := range vars {
		if d, ok := opts.Config.Variables[name]; ok && d.Sensitive {
			vars[name] = v.Mark(marks.Sensitive)
		}
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
