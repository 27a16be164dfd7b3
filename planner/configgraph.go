package planner

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// node kinds in the configuration graph.
const (
	localPrefix  = "local."
	outputPrefix = "output."
)

// resourceInfo is what the planner derives once per configured resource.
type resourceInfo struct {
	cfg     *config.Resource
	addr    state.Address
	provKey string
	prov    *providerInst
	schema  *providers.Schema
	spec    hcldec.Spec
	travs   []hcl.Traversal // references in the body and meta-arguments
	body    []hcl.Traversal // references in the body
	deps    []string        // resource-level direct dependencies
}

// buildGraph resolves providers and schemas for every resource and returns
// the configuration graph of resources, locals and outputs.
func (e *Engine) buildGraph(ctx context.Context) (*graph, map[string]*resourceInfo, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	g := newGraph()
	infos := map[string]*resourceInfo{}
	addrs := make([]string, 0, len(e.cfg.Resources))
	for a := range e.cfg.Resources {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	// The decoder specification of each schema, made once for all the
	// resources of its type.
	specs := map[*providers.Schema]hcldec.Spec{}
	for _, a := range addrs {
		info, d := e.resolveResource(ctx, e.cfg.Resources[a], specs)
		diags = append(diags, d...)
		if info == nil {
			continue
		}
		infos[a] = info
		g.add(a)
	}
	bodyReferences(infos)
	for name := range e.cfg.Locals {
		g.add(localPrefix + name)
	}
	for name := range e.cfg.Outputs {
		g.add(outputPrefix + name)
	}
	diags = append(diags, e.connectGraph(g, infos)...)
	// Direct resource dependencies, seen through locals.
	for a, info := range infos {
		info.deps = resourceDeps(g, a, infos)
	}
	return g, infos, diags
}

// resolveResource finds the provider and schema of a configured resource;
// it returns nil when it cannot. specs holds the decoder specifications
// made so far, by schema.
func (e *Engine) resolveResource(ctx context.Context, r *config.Resource, specs map[*providers.Schema]hcldec.Spec) (*resourceInfo, hcl.Diagnostics) {
	key, diags := e.providerKeyFor(r)
	if diags.HasErrors() {
		return nil, diags
	}
	pi, d := e.provider(ctx, key)
	diags = append(diags, d...)
	if d.HasErrors() {
		return nil, diags
	}
	schema := pi.resourceSchema(r.Mode, r.Type)
	if schema == nil {
		kind := "resource"
		if r.Mode == config.DataResource {
			kind = "data source"
		}
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unsupported " + kind + " type",
			Detail:   fmt.Sprintf("The provider %q does not support %s type %q.", key, kind, r.Type),
			Subject:  r.TypeRange.Ptr(),
		})
	}
	spec, ok := specs[schema]
	if !ok {
		spec = schema.DecoderSpec()
		specs[schema] = spec
	}
	// info.body is filled in by buildGraph.
	return &resourceInfo{cfg: r, addr: resourceAddr(r), provKey: key, prov: pi, schema: schema, spec: spec}, diags
}

// bodyReferences finds the references in the body of every resource, on
// every core: walking the expressions of a large configuration takes a
// while.
func bodyReferences(infos map[string]*resourceInfo) {
	list := make([]*resourceInfo, 0, len(infos))
	for _, info := range infos {
		list = append(list, info)
	}
	workers := min(runtime.GOMAXPROCS(0), len(list))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, info := range list[w*len(list)/workers : (w+1)*len(list)/workers] {
				info.body = hcldec.Variables(info.cfg.Config, info.spec)
			}
		}()
	}
	wg.Wait()
}

// connectGraph adds the edges of what resources, locals and outputs refer
// to, and reports references to resources that are not declared.
func (e *Engine) connectGraph(g *graph, infos map[string]*resourceInfo) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for a, info := range infos {
		travs := append([]hcl.Traversal{}, info.body...)
		if info.cfg.Count != nil {
			travs = append(travs, info.cfg.Count.Variables()...)
		}
		if info.cfg.ForEach != nil {
			travs = append(travs, info.cfg.ForEach.Variables()...)
		}
		travs = append(travs, info.cfg.DependsOn...)
		info.travs = travs
		diags = append(diags, e.connectRefs(g, infos, a, travs)...)
	}
	for name, l := range e.cfg.Locals {
		diags = append(diags, e.connectRefs(g, infos, localPrefix+name, l.Expr.Variables())...)
	}
	for name, o := range e.cfg.Outputs {
		travs := append(o.Expr.Variables(), o.DependsOn...)
		diags = append(diags, e.connectRefs(g, infos, outputPrefix+name, travs)...)
	}
	return diags
}

// connectRefs makes vertex from depend on the locals and resources travs
// refer to.
func (e *Engine) connectRefs(g *graph, infos map[string]*resourceInfo, from string, travs []hcl.Traversal) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, t := range travs {
		if t.RootName() == "local" {
			if n, ok := attrName(t, 1); ok {
				if _, ok := e.cfg.Locals[n]; ok {
					g.connect(from, localPrefix+n)
				}
			}
			continue
		}
		for _, a := range refAddrs([]hcl.Traversal{t}, e.managed) {
			if _, ok := infos[a]; ok {
				g.connect(from, a)
			} else if _, ok := e.cfg.Resources[a]; !ok {
				diags = append(diags, undeclared(t, "resource", a))
			}
		}
	}
	return diags
}

// resourceAddr is the address of a configured resource.
func resourceAddr(r *config.Resource) state.Address {
	if r.Mode == config.DataResource {
		return state.Address{Mode: state.ModeData, Type: r.Type, Name: r.Name}
	}
	return state.Address{Mode: state.ModeManaged, Type: r.Type, Name: r.Name}
}

// resourceDeps returns the resources v depends on directly or through local
// values only.
func resourceDeps(g *graph, v string, infos map[string]*resourceInfo) []string {
	seen := map[string]bool{}
	set := map[string]struct{}{}
	var visit func(string)
	visit = func(x string) {
		for _, d := range g.dependencies(x) {
			if seen[d] {
				continue
			}
			seen[d] = true
			if _, ok := infos[d]; ok {
				set[d] = struct{}{}
			} else if strings.HasPrefix(d, localPrefix) {
				visit(d)
			}
		}
	}
	visit(v)
	var out []string
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
