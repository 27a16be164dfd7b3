package planner

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner/config"
)

// checkPreventDestroy refuses plans that destroy a protected instance.
func (w *planWalk) checkPreventDestroy() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, c := range w.p.Changes {
		if c.Action != Delete && !c.Action.IsReplace() {
			continue
		}
		r, ok := w.e.cfg.Resources[c.Addr.ResourceAddress().String()]
		if !ok || !r.Lifecycle.PreventDestroy {
			continue
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Instance cannot be destroyed",
			Detail:   fmt.Sprintf("%s has lifecycle.prevent_destroy set, but the plan calls for it to be destroyed. To avoid this error and continue with the plan, either disable lifecycle.prevent_destroy or reduce the scope of the plan using -target.", c.Addr),
			Subject:  r.DeclRange.Ptr(),
		})
	}
	return diags
}

// ignoreChanges replaces the ignored attributes of cfg by their prior values.
func ignoreChanges(cfg, prior cty.Value, lc config.Lifecycle) cty.Value {
	if prior.IsNull() || cfg.IsNull() || !cfg.IsKnown() || (!lc.IgnoreAllChanges && len(lc.IgnoreChanges) == 0) {
		return cfg
	}
	ignored := map[string]bool{}
	for _, t := range lc.IgnoreChanges {
		if len(t) == 0 {
			continue
		}
		switch s := t[0].(type) {
		case hcl.TraverseRoot:
			ignored[s.Name] = true
		case hcl.TraverseAttr:
			ignored[s.Name] = true
		}
	}
	vals := cfg.AsValueMap()
	for name := range vals {
		if lc.IgnoreAllChanges || ignored[name] {
			vals[name] = prior.GetAttr(name)
		}
	}
	return cty.ObjectVal(vals)
}
