package planner

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
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
