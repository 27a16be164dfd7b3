package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/pond-htc/pond/providers"
)

func errDiag(summary string, err error, subject *hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: err.Error(), Subject: subject}
}

// providerDiags completes the diagnostics of a provider call: an error
// without a summary gets summary, a warning without one is summarised by
// its detail, and a diagnostic without a subject points at subject. The
// provider's diagnostics are left as they are.
func providerDiags(ds hcl.Diagnostics, summary string, subject *hcl.Range) hcl.Diagnostics {
	if len(ds) == 0 {
		return nil
	}
	out := make(hcl.Diagnostics, 0, len(ds))
	for _, d := range ds {
		if d == nil {
			continue
		}
		c := *d
		if c.Summary == "" {
			if c.Severity == hcl.DiagError {
				c.Summary = summary
			} else {
				c.Summary, c.Detail = c.Detail, ""
			}
		}
		if c.Subject == nil {
			c.Subject = subject
		}
		out = append(out, &c)
	}
	return out
}

// atAttributes places the diagnostics a provider made about one argument
// (see providers.AttributeRef) at that argument's value in body, when body
// is native syntax and sets it; the others are left as they are.
func atAttributes(ds hcl.Diagnostics, body hcl.Body) hcl.Diagnostics {
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		return ds
	}
	for _, d := range ds {
		name, ok := d.Extra.(providers.AttributeRef)
		if !ok {
			continue
		}
		if r := argumentRange(sb, string(name)); r != nil {
			d.Subject = r
		}
	}
	return ds
}

// argumentRange is the range of the argument name of body: an attribute's
// value, or a nested block's type (name "validate"); "factory.max_queued"
// names an argument of the nested block factory. It is nil when body does
// not set it.
func argumentRange(body *hclsyntax.Body, name string) *hcl.Range {
	first, rest, nested := strings.Cut(name, ".")
	if !nested {
		if a, ok := body.Attributes[name]; ok {
			r := a.Expr.Range()
			return &r
		}
	}
	for _, b := range body.Blocks {
		if b.Type != first || len(b.Labels) > 0 {
			continue
		}
		if !nested {
			r := b.TypeRange
			return &r
		}
		if r := argumentRange(b.Body, rest); r != nil {
			return r
		}
		r := b.TypeRange
		return &r
	}
	return nil
}

// appendNew appends to diags the diagnostics of d it does not hold yet:
// same severity, summary, detail and subject.
func appendNew(diags, d hcl.Diagnostics) hcl.Diagnostics {
	for _, x := range d {
		if !slices.ContainsFunc(diags, func(y *hcl.Diagnostic) bool { return sameDiagnostic(x, y) }) {
			diags = append(diags, x)
		}
	}
	return diags
}

func sameDiagnostic(a, b *hcl.Diagnostic) bool {
	if a.Severity != b.Severity || a.Summary != b.Summary || a.Detail != b.Detail || (a.Subject == nil) != (b.Subject == nil) {
		return false
	}
	return a.Subject == nil || *a.Subject == *b.Subject
}

// panicDiag reports a panic while planning or applying v.
func panicDiag(v string, r any, stack []byte) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Internal error while handling " + v,
		Detail:   fmt.Sprintf("%v\n\nThis is a bug in pond or one of its providers; please report it with this trace:\n\n%s", r, stack),
	}
}
