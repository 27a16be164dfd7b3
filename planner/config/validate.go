package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// refScope says which references an expression may make.
type refScope struct {
	// count and each allow count.index and each.key/each.value.
	count, each bool
	// onlyVar, when set, restricts references to var.<onlyVar>.
	onlyVar string
	// self is the address of the enclosing resource, which may not refer
	// to itself.
	self string
	// noRefs rejects every reference (backend configuration).
	noRefs bool
	// noResources rejects references to resources and data sources
	// (import blocks, evaluated before any).
	noResources bool
	// checkData holds the addresses of the enclosing check block's own
	// data sources.
	checkData map[string]bool
}

// Validate checks every reference the configuration makes: in locals,
// outputs, count and for_each, depends_on, variable validations, provider
// configurations and resource bodies. Each must name a declared object;
// count.index may appear only in resources with count and each.* only with
// for_each; a variable's validation may only refer to that variable; and
// local values must not refer to each other in a cycle. It also checks the
// moved and removed blocks (see MoveOrder).
func (c *Config) Validate() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, name := range sortedKeys(c.Variables) {
		v := c.Variables[name]
		for _, val := range v.Validations {
			sc := refScope{onlyVar: name}
			diags = append(diags, c.checkTraversals(val.Condition.Variables(), sc)...)
			diags = append(diags, c.checkTraversals(val.ErrorMessage.Variables(), sc)...)
			refsOwn := false
			for _, tr := range val.Condition.Variables() {
				if r, _ := ParseRef(tr); r != nil && r.Kind == RefVar && r.Name == name {
					refsOwn = true
				}
			}
			if !refsOwn {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid variable validation condition",
					Detail:   fmt.Sprintf("The condition for variable %q must refer to var.%s in order to test incoming values.", name, name),
					Subject:  val.Condition.Range().Ptr(),
				})
			}
		}
	}
	for _, name := range sortedKeys(c.Locals) {
		diags = append(diags, c.checkTraversals(c.Locals[name].Expr.Variables(), refScope{})...)
	}
	diags = append(diags, c.localCycles()...)
	for _, name := range sortedKeys(c.Outputs) {
		o := c.Outputs[name]
		if o.Expr != nil {
			diags = append(diags, c.checkTraversals(o.Expr.Variables(), refScope{})...)
		}
		diags = append(diags, c.checkTraversals(o.DependsOn, refScope{})...)
	}
	for _, key := range sortedKeys(c.Providers) {
		diags = append(diags, c.checkTraversals(BodyTraversals(c.Providers[key].Config), refScope{})...)
	}
	if c.Pond != nil && c.Pond.Backend != nil {
		diags = append(diags, c.checkTraversals(BodyTraversals(c.Pond.Backend.Config), refScope{noRefs: true})...)
	}
	for _, addr := range sortedKeys(c.Resources) {
		r := c.Resources[addr]
		meta := refScope{self: addr}
		if r.Count != nil {
			diags = append(diags, c.checkTraversals(r.Count.Variables(), meta)...)
		}
		if r.ForEach != nil {
			diags = append(diags, c.checkTraversals(r.ForEach.Variables(), meta)...)
		}
		diags = append(diags, c.checkTraversals(r.DependsOn, meta)...)
		body := refScope{self: addr, count: r.Count != nil, each: r.ForEach != nil}
		diags = append(diags, c.checkTraversals(BodyTraversals(r.Config), body)...)
	}
	diags = append(diags, c.validateRefactoring()...)
	diags = append(diags, c.validateImportsAndChecks()...)
	return diags
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (c *Config) checkTraversals(trs []hcl.Traversal, sc refScope) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, tr := range trs {
		diags = append(diags, c.checkTraversal(tr, sc)...)
	}
	return diags
}

func (c *Config) checkTraversal(tr hcl.Traversal, sc refScope) hcl.Diagnostics {
	ref, diags := ParseRef(tr)
	if diags.HasErrors() {
		return diags
	}
	rng := ref.SourceRange
	errf := func(summary, format string, args ...any) hcl.Diagnostics {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   fmt.Sprintf(format, args...),
			Subject:  rng.Ptr(),
		}}
	}
	if sc.noRefs {
		return errf("Variables not allowed", "The backend configuration is read before anything else is evaluated, so it may not refer to %s.", ref.Subject())
	}
	if sc.onlyVar != "" && (ref.Kind != RefVar || ref.Name != sc.onlyVar) {
		return errf("Invalid reference in variable validation", "The validation of variable %q may only refer to the variable itself, as var.%s, not to %s.", sc.onlyVar, sc.onlyVar, ref.Subject())
	}
	switch ref.Kind {
	case RefVar:
		if c.Variables[ref.Name] == nil {
			return errf("Reference to undeclared input variable", "An input variable with the name %q has not been declared.%s This variable can be declared with a variable %q {} block.", ref.Name, suggest("var.", ref.Name, sortedKeys(c.Variables)), ref.Name)
		}
	case RefLocal:
		if c.Locals[ref.Name] == nil {
			return errf("Reference to undeclared local value", "A local value with the name %q has not been declared.%s", ref.Name, suggest("local.", ref.Name, sortedKeys(c.Locals)))
		}
	case RefResource, RefData:
		addr := ref.Subject()
		if sc.noResources {
			return errf("Invalid reference in import block", "An import block is evaluated before any resource is planned: its for_each, id and to key may refer to variables, local values and each.key or each.value only, not to %s.", addr)
		}
		if ref.Kind == RefData && sc.checkData[addr] {
			if addr == sc.self {
				return errf("Self-referential block", "Configuration for %s may not refer to itself.", addr)
			}
			return nil
		}
		if c.Resources[addr] == nil {
			var known []string
			for a := range c.Resources {
				known = append(known, a)
			}
			kind := "managed resource"
			if ref.Kind == RefData {
				kind = "data source"
			}
			detail := fmt.Sprintf("A %s %q %q has not been declared.", kind, ref.Type, ref.Name)
			if s := nameSuggestion(addr, known); s != "" {
				detail += fmt.Sprintf(" Did you mean %s?", s)
			} else if ref.Kind == RefResource {
				if s := nameSuggestion(ref.Type, []string{"var", "local", "data", "count", "each", "path"}); s != "" {
					detail += fmt.Sprintf(" Did you mean %s.%s?", s, ref.Name)
				}
			}
			summary := "Reference to undeclared resource"
			if ref.Kind == RefData {
				summary = "Reference to undeclared data source"
			}
			return errf(summary, "%s", detail)
		}
		if addr == sc.self {
			return errf("Self-referential block", "Configuration for %s may not refer to itself.", addr)
		}
	case RefCount:
		if !sc.count {
			return errf(`Reference to "count" in non-counted context`, `The "count" object can only be used in a resource block's body when that block sets the "count" argument.`)
		}
	case RefEach:
		if !sc.each {
			return errf(`Reference to "each" in context without for_each`, `The "each" object can only be used in a resource or import block that sets the "for_each" argument.`)
		}
	case RefSelf:
		return errf(`Invalid "self" reference`, `The "self" object is not available here.`)
	}
	return nil
}

func suggest(prefix, name string, known []string) string {
	if s := nameSuggestion(name, known); s != "" {
		return fmt.Sprintf(" Did you mean %s%s?", prefix, s)
	}
	return ""
}

// localCycles reports each cycle among local values once, naming them.
func (c *Config) localCycles() hcl.Diagnostics {
	edges := map[string][]string{}
	for name, l := range c.Locals {
		for _, tr := range l.Expr.Variables() {
			if r, _ := ParseRef(tr); r != nil && r.Kind == RefLocal && c.Locals[r.Name] != nil && !slices.Contains(edges[name], r.Name) {
				edges[name] = append(edges[name], r.Name)
			}
		}
		sort.Strings(edges[name])
	}
	var diags hcl.Diagnostics
	for _, scc := range stronglyConnected(sortedKeys(c.Locals), edges) {
		if len(scc) == 1 && !slices.Contains(edges[scc[0]], scc[0]) {
			continue
		}
		sort.Strings(scc)
		path := cyclePath(scc[0], scc, edges)
		var names []string
		for _, n := range path {
			names = append(names, "local."+n)
		}
		first := c.Locals[scc[0]]
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cycle in local values",
			Detail:   fmt.Sprintf("The local values %s refer to each other in a cycle: %s.", strings.Join(prefixAll("local.", scc), ", "), strings.Join(names, " -> ")),
			Subject:  first.DeclRange.Ptr(),
		})
	}
	return diags
}

func prefixAll(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

// cyclePath finds a path from start back to start within the component.
func cyclePath(start string, comp []string, edges map[string][]string) []string {
	in := map[string]bool{}
	for _, n := range comp {
		in[n] = true
	}
	prev := map[string]string{}
	queue := []string{start}
	seen := map[string]bool{}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, m := range edges[n] {
			if !in[m] {
				continue
			}
			if m == start {
				var rev []string
				for x := n; x != start; x = prev[x] {
					rev = append(rev, x)
				}
				path := []string{start}
				for i := len(rev) - 1; i >= 0; i-- {
					path = append(path, rev[i])
				}
				return append(path, start)
			}
			if !seen[m] {
				seen[m] = true
				prev[m] = n
				queue = append(queue, m)
			}
		}
	}
	return []string{start, start}
}

// stronglyConnected returns the strongly connected components of a graph
// (Tarjan's algorithm), in a deterministic order.
func stronglyConnected(nodes []string, edges map[string][]string) [][]string {
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	next := 0
	var visit func(n string)
	visit = func(n string) {
		index[n], low[n] = next, next
		next++
		stack = append(stack, n)
		onStack[n] = true
		for _, m := range edges[n] {
			if _, ok := index[m]; !ok {
				visit(m)
				low[n] = min(low[n], low[m])
			} else if onStack[m] {
				low[n] = min(low[n], index[m])
			}
		}
		if low[n] == index[n] {
			var comp []string
			for {
				m := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[m] = false
				comp = append(comp, m)
				if m == n {
					break
				}
			}
			out = append(out, comp)
		}
	}
	for _, n := range nodes {
		if _, ok := index[n]; !ok {
			visit(n)
		}
	}
	return out
}

// BodyTraversals returns every variable traversal in a body: for native
// syntax by walking all attributes and nested blocks (skipping the resource
// meta-arguments and lifecycle block, and the iterator of dynamic blocks),
// for JSON by taking every property as an expression.
func BodyTraversals(body hcl.Body) []hcl.Traversal {
	if body == nil {
		return nil
	}
	var out []hcl.Traversal
	if sb, ok := body.(*hclsyntax.Body); ok {
		walkSyntaxBody(sb, true, nil, &out)
		return out
	}
	attrs, _ := body.JustAttributes()
	for _, name := range sortedKeys(attrs) {
		out = append(out, attrs[name].Expr.Variables()...)
	}
	return out
}

// BodyReferences parses the traversals of BodyTraversals into Refs.
func BodyReferences(body hcl.Body) ([]*Ref, hcl.Diagnostics) {
	return refsFromTraversals(BodyTraversals(body))
}

// ResourceReferences returns everything a resource refers to: in count,
// for_each, depends_on and its body, for the planner's dependency graph.
func ResourceReferences(r *Resource) ([]*Ref, hcl.Diagnostics) {
	var trs []hcl.Traversal
	if r.Count != nil {
		trs = append(trs, r.Count.Variables()...)
	}
	if r.ForEach != nil {
		trs = append(trs, r.ForEach.Variables()...)
	}
	trs = append(trs, r.DependsOn...)
	trs = append(trs, BodyTraversals(r.Config)...)
	return refsFromTraversals(trs)
}

func walkSyntaxBody(b *hclsyntax.Body, top bool, iters []string, out *[]hcl.Traversal) {
	add := func(expr hclsyntax.Expression, iters []string) {
		for _, tr := range hclsyntax.Variables(expr) {
			if !slices.Contains(iters, tr.RootName()) {
				*out = append(*out, tr)
			}
		}
	}
	for _, name := range sortedKeys(b.Attributes) {
		if top && slices.Contains(MetaArguments, name) {
			continue
		}
		add(b.Attributes[name].Expr, iters)
	}
	for _, blk := range b.Blocks {
		if top && blk.Type == "lifecycle" {
			continue
		}
		if blk.Type != "dynamic" || len(blk.Labels) != 1 {
			walkSyntaxBody(blk.Body, false, iters, out)
			continue
		}
		iter := blk.Labels[0]
		if a := blk.Body.Attributes["iterator"]; a != nil {
			if kw := hcl.ExprAsKeyword(a.Expr); kw != "" {
				iter = kw
			}
		}
		inner := append(slices.Clone(iters), iter)
		if a := blk.Body.Attributes["for_each"]; a != nil {
			add(a.Expr, iters)
		}
		if a := blk.Body.Attributes["labels"]; a != nil {
			add(a.Expr, inner)
		}
		for _, cb := range blk.Body.Blocks {
			if cb.Type == "content" {
				walkSyntaxBody(cb.Body, false, inner, out)
			}
		}
	}
}
