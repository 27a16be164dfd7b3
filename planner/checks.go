package planner

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// CheckStatus is the outcome of one check block.
type CheckStatus int

// Check outcomes, as Terraform names them.
const (
	// CheckUnknown: what the check needs is not known until apply.
	CheckUnknown CheckStatus = iota
	CheckPass
	CheckFail
	// CheckError: the check could not be evaluated (its data source
	// could not be read, or an expression failed).
	CheckError
)

// String names the status as Terraform's JSON output does.
func (s CheckStatus) String() string {
	switch s {
	case CheckPass:
		return "pass"
	case CheckFail:
		return "fail"
	case CheckError:
		return "error"
	}
	return "unknown"
}

// CheckResult is the outcome of one check block.
type CheckResult struct {
	Name   string
	Status CheckStatus
	// Failures are the error messages of the failing assertions.
	Failures []string
	// Evaluated is false when the run did not evaluate the check at all
	// (a destroy or refresh-only run, or errors before the checks): its
	// Status is then CheckUnknown.
	Evaluated bool
}

// unevaluatedChecks is the outcome of every check block of the
// configuration when a run does not evaluate them.
func (e *Engine) unevaluatedChecks() []CheckResult {
	var results []CheckResult
	for _, ch := range e.cfg.Checks {
		results = append(results, CheckResult{Name: ch.Name, Status: CheckUnknown})
	}
	return results
}

// StateCheckResults is results as the state records them, in Terraform's
// check_results form: one object, check.NAME, per evaluated check block.
func StateCheckResults(results []CheckResult) []*state.CheckResult {
	var out []*state.CheckResult
	for _, r := range results {
		addr := "check." + r.Name
		c := &state.CheckResult{ObjectKind: "check", ConfigAddr: addr, Status: r.Status.String()}
		if r.Evaluated {
			c.Objects = []*state.CheckObject{{ObjectAddr: addr, Status: r.Status.String(), FailureMessages: slices.Clone(r.Failures)}}
		}
		out = append(out, c)
	}
	return out
}

// evalChecks evaluates every check block against sc: the planned values
// during a plan, the new state's after an apply. Each check first reads
// its own data sources; then each assertion whose condition is false
// gives a warning, never an error: a check reports, it does not stop.
// What a check cannot evaluate yet (unknown until apply) it skips.
func (e *Engine) evalChecks(ctx context.Context, sc *scope) ([]CheckResult, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var results []CheckResult
	specs := map[*providers.Schema]hcldec.Spec{}
	for _, ch := range e.cfg.Checks {
		res, d := e.evalCheck(ctx, sc, ch, specs)
		diags = append(diags, d...)
		results = append(results, res)
	}
	return results, diags
}

func (e *Engine) evalCheck(ctx context.Context, sc *scope, ch *config.Check, specs map[*providers.Schema]hcldec.Spec) (CheckResult, hcl.Diagnostics) {
	res := CheckResult{Name: ch.Name, Evaluated: true}
	var diags hcl.Diagnostics
	warn := func(summary, detail string, subject *hcl.Range) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: detail, Subject: subject})
	}
	// The check's own data sources, by type and name.
	data := map[string]map[string]cty.Value{}
	for _, r := range ch.Data {
		info, d := e.resolveResource(ctx, r, specs)
		if d.HasErrors() || info == nil {
			// A data source pond cannot even resolve is a mistake in
			// the configuration, not a failing check.
			return CheckResult{Name: ch.Name, Status: CheckError, Evaluated: true}, append(diags, d...)
		}
		ectx, d := sc.evalContext(config.BodyTraversals(r.Config), nil)
		var cfgVal cty.Value
		if !d.HasErrors() {
			var dd hcl.Diagnostics
			cfgVal, dd = hcldec.Decode(r.Config, info.spec, ectx)
			d = append(d, dd...)
		}
		if d.HasErrors() {
			return CheckResult{Name: ch.Name, Status: CheckError, Evaluated: true}, append(diags, d...)
		}
		cfgVal, _ = unmarkSensitive(fillObject(cfgVal, info.schema))
		if !cfgVal.IsWhollyKnown() {
			res.Status = CheckUnknown
			return res, diags
		}
		addr := info.addr
		resp := info.prov.p.ReadDataSource(ctx, providers.ReadDataRequest{TypeName: r.Type, Address: addr.String(), Config: cfgVal})
		if err := providers.Err(resp.Diagnostics); err != nil {
			warn("Check block data source read failed", fmt.Sprintf("Check %q could not read %s (%s): %s", ch.Name, addr, e.rangeString(r.DeclRange), err), r.DeclRange.Ptr())
			res.Status = CheckError
			return res, diags
		}
		v, err := convert.Convert(resp.Value, info.schema.ImpliedType())
		if err != nil {
			warn("Check block data source read failed", fmt.Sprintf("The provider returned an invalid value for %s of check %q: %s", addr, ch.Name, err), r.DeclRange.Ptr())
			res.Status = CheckError
			return res, diags
		}
		if data[r.Type] == nil {
			data[r.Type] = map[string]cty.Value{}
		}
		data[r.Type][r.Name] = v
	}
	res.Status = CheckPass
	for _, a := range ch.Asserts {
		ok, msg, d := evalAssert(sc, a, data)
		if d.HasErrors() {
			// An assertion that cannot be evaluated fails the check,
			// as a warning, with the reason.
			for _, x := range d {
				if x.Severity == hcl.DiagError {
					warn("Check block assertion could not be evaluated", fmt.Sprintf("%s (check %q, %s): %s", x.Summary, ch.Name, e.rangeString(a.DeclRange), x.Detail), x.Subject)
				}
			}
			res.Status = CheckError
			continue
		}
		switch {
		case ok == nil:
			if res.Status == CheckPass {
				res.Status = CheckUnknown
			}
		case !*ok:
			warn("Check block assertion failed", fmt.Sprintf("%s\n\n(check %q, %s)", msg, ch.Name, e.rangeString(a.Condition.Range())), a.Condition.Range().Ptr())
			res.Failures = append(res.Failures, msg)
			if res.Status != CheckError {
				res.Status = CheckFail
			}
		}
	}
	return res, diags
}

// evalAssert evaluates one assertion; ok is nil when its condition is not
// known yet.
func evalAssert(sc *scope, a *config.Assert, data map[string]map[string]cty.Value) (ok *bool, msg string, diags hcl.Diagnostics) {
	eval := func(expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
		var travs []hcl.Traversal
		for _, tr := range expr.Variables() {
			if tr.RootName() == "data" && len(tr) >= 3 {
				typ, _ := attrName(tr, 1)
				name, _ := attrName(tr, 2)
				if _, own := data[typ][name]; own {
					continue
				}
			}
			travs = append(travs, tr)
		}
		ectx, diags := sc.evalContext(travs, nil)
		if diags.HasErrors() {
			return cty.DynamicVal, diags
		}
		if len(data) > 0 {
			merged := map[string]cty.Value{}
			if dv, ok := ectx.Variables["data"]; ok {
				for typ, v := range dv.AsValueMap() {
					merged[typ] = v
				}
			}
			for typ, m := range data {
				byName := map[string]cty.Value{}
				if v, ok := merged[typ]; ok {
					for n, x := range v.AsValueMap() {
						byName[n] = x
					}
				}
				for n, x := range m {
					byName[n] = x
				}
				merged[typ] = cty.ObjectVal(byName)
			}
			ectx.Variables["data"] = cty.ObjectVal(merged)
		}
		v, d := expr.Value(ectx)
		return v, append(diags, d...)
	}
	cond, diags := eval(a.Condition)
	if diags.HasErrors() {
		return nil, "", diags
	}
	cond, _ = cond.UnmarkDeep()
	cond, err := convert.Convert(cond, cty.Bool)
	if err != nil {
		return nil, "", append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid condition result", Detail: "The condition must be a bool: " + err.Error() + ".", Subject: a.Condition.Range().Ptr()})
	}
	if !cond.IsKnown() {
		return nil, "", diags
	}
	if cond.IsNull() {
		return nil, "", append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid condition result", Detail: "The condition is null: it must be true or false.", Subject: a.Condition.Range().Ptr()})
	}
	t := cond.True()
	if t {
		return &t, "", diags
	}
	mv, d := eval(a.ErrorMessage)
	if mv.ContainsMarked() {
		return &t, "The assertion failed; its error_message refers to sensitive values, so it is not shown.", diags
	}
	if d.HasErrors() || !mv.IsKnown() || mv.IsNull() {
		return &t, "The assertion failed; its error_message could not be evaluated.", diags
	}
	if s, err := convert.Convert(mv, cty.String); err == nil {
		return &t, s.AsString(), diags
	}
	return &t, "The assertion failed; its error_message is not a string.", diags
}

// rangeString is r's start as FILE:LINE:COLUMN, FILE relative to the
// configuration directory.
func (e *Engine) rangeString(r hcl.Range) string {
	if rel, err := filepath.Rel(e.cfg.Dir, r.Filename); err == nil && !strings.HasPrefix(rel, "..") {
		r.Filename = rel
	}
	return config.RangeString(r)
}
