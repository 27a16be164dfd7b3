package planner

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/state"
)

// applyTargets keeps only the changes -target asks for: the targets and what
// they depend on (or, when destroying, what depends on them).
func (w *planWalk) applyTargets(g *graph) hcl.Diagnostics {
	targets := w.p.Options.Targets
	if len(targets) == 0 {
		return nil
	}
	var diags hcl.Diagnostics
	keep := map[string]bool{} // resource addresses, or instance addresses
	for _, t := range targets {
		found := false
		for _, c := range w.p.Changes {
			if c.Addr.String() == t || c.Addr.ResourceAddress().String() == t {
				found = true
				keep[c.Addr.String()] = true
			}
		}
		if _, ok := w.e.cfg.Resources[t]; ok {
			found = true
		}
		if !found {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Target not found", Detail: fmt.Sprintf("-target %s matches nothing in the configuration or state.", t)})
		}
	}
	// Expand along dependencies at resource level.
	resKeep := map[string]bool{}
	for _, c := range w.p.Changes {
		if keep[c.Addr.String()] {
			resKeep[c.Addr.ResourceAddress().String()] = true
		}
	}
	for _, t := range targets {
		if _, ok := w.e.cfg.Resources[t]; ok {
			resKeep[t] = true
		}
	}
	if w.p.Mode == DestroyMode {
		changed := true
		for changed {
			changed = false
			for _, c := range w.p.Changes {
				a := c.Addr.ResourceAddress().String()
				if resKeep[a] {
					continue
				}
				for _, d := range c.Deps {
					if resKeep[d] {
						resKeep[a] = true
						changed = true
						break
					}
				}
			}
		}
	} else {
		var visit func(string)
		visit = func(a string) {
			for _, d := range resourceDeps(g, a, w.infos) {
				if !resKeep[d] {
					resKeep[d] = true
					visit(d)
				}
			}
		}
		for a := range resKeep {
			visit(a)
		}
	}
	var out []*ResourceChange
	for _, c := range w.p.Changes {
		ra := c.Addr.ResourceAddress().String()
		if keep[c.Addr.String()] || (resKeep[ra] && !targetsInstanceOnly(targets, ra)) {
			out = append(out, c)
		}
	}
	w.p.Changes = out
	return diags
}

// targetsInstanceOnly reports whether every target naming ra's instances
// names a single instance rather than the whole resource.
func targetsInstanceOnly(targets []string, ra string) bool {
	named := false
	for _, t := range targets {
		if t == ra {
			return false
		}
		if strings.HasPrefix(t, ra+"[") {
			named = true
		}
	}
	return named
}

// applyExcludes leaves out the changes -exclude asks to skip, as OpenTofu
// does: the excluded resources or instances, and what depends on them
// (or, when destroying, what they depend on, which must outlive them).
func (w *planWalk) applyExcludes(g *graph) hcl.Diagnostics {
	excludes := w.p.Options.Excludes
	if len(excludes) == 0 {
		return nil
	}
	if len(w.p.Options.Targets) > 0 {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid combination of options", Detail: "-target and -exclude cannot be used together: use one or the other."}}
	}
	var diags hcl.Diagnostics
	skip := map[string]bool{}    // instances
	skipRes := map[string]bool{} // whole resources
	seeds := map[string]bool{}   // resources whose relatives are skipped too
	for _, x := range excludes {
		a, err := state.ParseAddress(x)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid -exclude address", Detail: err.Error()})
			continue
		}
		ra := a.ResourceAddress().String()
		found := false
		if _, ok := w.e.cfg.Resources[ra]; ok {
			found = true
		}
		for _, c := range w.p.Changes {
			if c.Addr.ResourceAddress() == a.ResourceAddress() && (!a.HasKey() || c.Addr.String() == a.String()) {
				found = true
			}
		}
		if !found {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Excluded address not found", Detail: fmt.Sprintf("-exclude %s matches nothing in the configuration or state.", x)})
			continue
		}
		if a.HasKey() {
			skip[a.String()] = true
		} else {
			skipRes[ra] = true
		}
		seeds[ra] = true
	}
	if diags.HasErrors() {
		return diags
	}
	// Recorded and configured dependencies, by resource address.
	deps := map[string]map[string]bool{}
	addDep := func(from, to string) {
		if deps[from] == nil {
			deps[from] = map[string]bool{}
		}
		deps[from][to] = true
	}
	for a := range w.infos {
		for _, d := range resourceDeps(g, a, w.infos) {
			addDep(a, d)
		}
	}
	for _, c := range w.p.Changes {
		for _, d := range c.Deps {
			addDep(c.Addr.ResourceAddress().String(), d)
		}
	}
	// related(a, b): b is skipped along with a.
	related := func(a, b string) bool {
		if w.p.Mode == DestroyMode {
			return deps[a][b]
		}
		return deps[b][a]
	}
	all := map[string]bool{}
	for a, ds := range deps {
		all[a] = true
		for d := range ds {
			all[d] = true
		}
	}
	var queue []string
	for s := range seeds {
		queue = append(queue, s)
	}
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		for b := range all {
			if !skipRes[b] && related(a, b) {
				skipRes[b] = true
				queue = append(queue, b)
			}
		}
	}
	out := w.p.Changes[:0]
	for _, c := range w.p.Changes {
		if skip[c.Addr.String()] || skipRes[c.Addr.ResourceAddress().String()] {
			continue
		}
		out = append(out, c)
	}
	w.p.Changes = out
	return diags
}
