package cli

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner/config"
)

func (m *meta) cmdValidate(ctx context.Context, args []string) int {
	fs := m.newFlagSet("validate", "validate [-json] [-no-color]")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if *jsonOut {
		m.color = false
	}
	cfg, diags := config.LoadDir(m.dir, loadOptions())
	if cfg != nil && len(cfg.Files) == 0 && !diags.HasErrors() {
		diags = append(diags, noConfigDiag(m.dir, ""))
	} else if cfg != nil {
		m.files = cfg.Files
		if !diags.HasErrors() {
			diags = append(diags, cfg.Validate()...)
		}
		if !diags.HasErrors() {
			eng := m.engine(cfg, unknownVars(cfg), "", nil)
			diags = append(diags, eng.Validate(ctx)...)
			eng.Close()
		}
	}
	if *jsonOut {
		m.printJSON(map[string]any{
			"format_version": "1.0",
			"valid":          !diags.HasErrors(),
			"error_count":    countSeverity(diags, hcl.DiagError),
			"warning_count":  countSeverity(diags, hcl.DiagWarning),
			"diagnostics":    config.DiagnosticsJSON(m.relDiags(diags)),
		})
		if diags.HasErrors() {
			return 1
		}
		return 0
	}
	if m.diags(diags) {
		return 1
	}
	fmt.Fprintln(m.stdout, m.col().green("Success!")+" The configuration is valid.")
	return 0
}

// unknownVars gives every variable an unknown value of its type, so that
// validate checks the configuration for every possible input.
func unknownVars(cfg *config.Config) map[string]cty.Value {
	out := map[string]cty.Value{}
	for name, v := range cfg.Variables {
		ty := v.Type
		if ty == cty.NilType {
			ty = cty.DynamicPseudoType
		}
		out[name] = cty.UnknownVal(ty)
	}
	return out
}

func countSeverity(d hcl.Diagnostics, sev hcl.DiagnosticSeverity) int {
	n := 0
	for _, x := range d {
		if x.Severity == sev {
			n++
		}
	}
	return n
}
