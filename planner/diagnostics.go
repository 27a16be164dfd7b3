package planner

import (
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"
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
