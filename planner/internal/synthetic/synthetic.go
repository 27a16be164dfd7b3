// Package synthetic is an in-memory provider for planner tests and
// benchmarks. Its objects live in a World shared by every provider instance
// made from the same factory, so tests can change the world behind the
// planner's back and see drift.
package synthetic

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/providers"
)

// World holds the objects the provider manages, keyed by id.
type World struct {
	mu      sync.Mutex
	objects map[string]cty.Value
	nextID  int
	// Fail makes Create, Update or Delete of the named address fail.
	Fail map[string]bool
	// FailAt makes them fail with an error about the named argument.
	FailAt map[string]string
	// FailPlan makes Plan of the named address fail, as a provider
	// refuses a configuration it cannot create.
	FailPlan map[string]bool
	// Panic makes Create, Update or Delete of the named address panic.
	Panic map[string]bool
	// Warn makes Plan and Apply of the named address warn with this
	// summary.
	Warn map[string]string
	// Calls counts provider calls by method name.
	Calls map[string]int
	// OnApply, when set, is called with the address of each change as it
	// is applied, before it is made.
	OnApply func(address string)
}

// NewWorld returns an empty world.
func NewWorld() *World {
	return &World{objects: map[string]cty.Value{}, Fail: map[string]bool{}, FailAt: map[string]string{}, FailPlan: map[string]bool{}, Panic: map[string]bool{},
		Warn: map[string]string{}, Calls: map[string]int{}}
}

// Len returns the number of objects in the world.
func (w *World) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.objects)
}

// Delete removes an object, as if it had been destroyed outside pond.
func (w *World) Delete(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.objects, id)
}

// IDs returns the ids of every object, sorted.
func (w *World) IDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.objects))
	for id := range w.objects {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Set changes an attribute of an object, as if changed outside pond.
func (w *World) Set(id, attr string, v cty.Value) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.objects[id]
	if !ok {
		return
	}
	m := o.AsValueMap()
	m[attr] = v
	w.objects[id] = cty.ObjectVal(m)
}

func (w *World) count(m string) {
	w.mu.Lock()
	w.Calls[m]++
	w.mu.Unlock()
}

// warnings returns the warning asked for address, if any.
func (w *World) warnings(address string) hcl.Diagnostics {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.Warn[address]; ok {
		return hcl.Diagnostics{providers.Warning(s, "The synthetic provider warns about "+address+".")}
	}
	return nil
}

// Factory returns a provider factory bound to w.
func (w *World) Factory() providers.Factory {
	return func() providers.Provider { return &Provider{w: w} }
}

// Provider is the synthetic provider.
type Provider struct {
	w *World
}

var poolSchema = &providers.Schema{
	Attributes: map[string]*providers.Attribute{
		"id":              {Type: cty.String, Computed: true},
		"nodes":           {Type: cty.Number, Optional: true, Computed: true},
		"slots":           {Type: cty.Number, Optional: true, ForceNew: true},
		"labels":          {Type: cty.Map(cty.String), Optional: true},
		"secret":          {Type: cty.String, Optional: true, Sensitive: true},
		"central_manager": {Type: cty.String, Computed: true},
		"members":         {Type: cty.List(cty.String), Computed: true},
	},
}

var querySchema = &providers.Schema{
	Attributes: map[string]*providers.Attribute{
		"requirements": {Type: cty.String, Required: true},
		"k":            {Type: cty.Number, Optional: true},
		"matches":      {Type: cty.List(cty.String), Computed: true},
	},
}

// Schema implements providers.Provider.
func (p *Provider) Schema() *providers.ProviderSchema {
	return &providers.ProviderSchema{
		Provider: &providers.Schema{Attributes: map[string]*providers.Attribute{
			"label": {Type: cty.String, Optional: true},
		}},
		Resources:   map[string]*providers.Schema{"pool": poolSchema, "pond": poolSchema},
		DataSources: map[string]*providers.Schema{"sea_query": querySchema},
	}
}

// Configure implements providers.Provider.
func (p *Provider) Configure(ctx context.Context, req providers.ConfigureRequest) providers.ConfigureResponse {
	p.w.count("Configure")
	return providers.ConfigureResponse{}
}

// ValidateResourceConfig implements providers.Provider.
func (p *Provider) ValidateResourceConfig(ctx context.Context, req providers.ValidateRequest) providers.ValidateResponse {
	n := req.Config.GetAttr("nodes")
	if n.IsKnown() && !n.IsNull() {
		if bf := n.AsBigFloat(); bf.Sign() < 0 {
			return providers.ValidateResponse{Diagnostics: providers.FromError(fmt.Errorf("nodes: must be at least 0"))}
		}
	}
	return providers.ValidateResponse{}
}

// PlanResourceChange implements providers.Provider.
func (p *Provider) PlanResourceChange(ctx context.Context, req providers.PlanRequest) providers.PlanResponse {
	p.w.count("Plan")
	p.w.mu.Lock()
	failPlan := p.w.FailPlan[req.Address]
	p.w.mu.Unlock()
	if failPlan {
		return providers.PlanResponse{Diagnostics: providers.FromError(fmt.Errorf("synthetic refusal of %s", req.Address))}
	}
	m := req.ProposedNew.AsValueMap()
	if req.Config.GetAttr("nodes").IsNull() {
		m["nodes"] = cty.NumberIntVal(1)
	}
	if req.Prior.IsNull() {
		m["id"] = cty.UnknownVal(cty.String)
		m["central_manager"] = cty.UnknownVal(cty.String)
		m["members"] = cty.UnknownVal(cty.List(cty.String))
	} else if eq := m["nodes"].Equals(req.Prior.GetAttr("nodes")); eq.IsKnown() && eq.False() || !m["nodes"].IsKnown() {
		m["members"] = cty.UnknownVal(cty.List(cty.String))
	}
	return providers.PlanResponse{Planned: cty.ObjectVal(m), Diagnostics: p.w.warnings(req.Address)}
}

// ApplyResourceChange implements providers.Provider.
func (p *Provider) ApplyResourceChange(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	p.w.count("Apply")
	if p.w.OnApply != nil {
		p.w.OnApply(req.Address)
	}
	warnings := p.w.warnings(req.Address)
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	if p.w.Fail[req.Address] {
		return providers.ApplyResponse{Diagnostics: providers.FromError(fmt.Errorf("synthetic failure of %s", req.Address))}
	}
	if a, ok := p.w.FailAt[req.Address]; ok {
		return providers.ApplyResponse{Diagnostics: hcl.Diagnostics{providers.AttributeError(a, fmt.Errorf("synthetic failure of %s at %s", req.Address, a))}}
	}
	if p.w.Panic[req.Address] {
		p.w.mu.Unlock()
		defer p.w.mu.Lock()
		panic("synthetic panic in " + req.Address)
	}
	if req.Planned.IsNull() {
		delete(p.w.objects, req.Prior.GetAttr("id").AsString())
		return providers.ApplyResponse{New: req.Planned, Diagnostics: warnings}
	}
	m := req.Planned.AsValueMap()
	id := ""
	if req.Prior.IsNull() {
		p.w.nextID++
		id = fmt.Sprintf("syn-%d", p.w.nextID)
	} else {
		id = req.Prior.GetAttr("id").AsString()
	}
	m["id"] = cty.StringVal(id)
	m["central_manager"] = cty.StringVal(id + ":cm")
	n, _ := m["nodes"].AsBigFloat().Int64()
	members := make([]cty.Value, n)
	for i := range members {
		members[i] = cty.StringVal(fmt.Sprintf("%s-%d", id, i))
	}
	if n == 0 {
		m["members"] = cty.ListValEmpty(cty.String)
	} else {
		m["members"] = cty.ListVal(members)
	}
	v := cty.ObjectVal(m)
	p.w.objects[id] = v
	return providers.ApplyResponse{New: v, Diagnostics: warnings}
}

// ReadResource implements providers.Provider.
func (p *Provider) ReadResource(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	p.w.count("Read")
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	v, ok := p.w.objects[req.Current.GetAttr("id").AsString()]
	if !ok {
		return providers.ReadResponse{New: cty.NullVal(req.Current.Type())}
	}
	return providers.ReadResponse{New: v}
}

// ImportResource implements providers.Provider.
func (p *Provider) ImportResource(ctx context.Context, req providers.ImportRequest) providers.ImportResponse {
	p.w.count("Import")
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	v, ok := p.w.objects[req.ID]
	if !ok {
		return providers.ImportResponse{Diagnostics: providers.FromError(fmt.Errorf("no object with id %q", req.ID))}
	}
	return providers.ImportResponse{Imported: v}
}

// ReadDataSource implements providers.Provider.
func (p *Provider) ReadDataSource(ctx context.Context, req providers.ReadDataRequest) providers.ReadDataResponse {
	p.w.count("ReadData")
	m := req.Config.AsValueMap()
	m["matches"] = cty.ListVal([]cty.Value{cty.StringVal("node-a"), cty.StringVal("node-b")})
	return providers.ReadDataResponse{Value: cty.ObjectVal(m), Diagnostics: p.w.warnings(req.Address)}
}

// Close implements providers.Provider.
func (p *Provider) Close() error { return nil }
