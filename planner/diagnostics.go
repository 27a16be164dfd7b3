package planner

import (
	"fmt"
	"slices"
	"strconv"
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
// is native syntax and sets it; the others are left as they are. A
// reference may also name a nested block, as TYPE (the first block of that
// type), TYPE[i] (the i-th, from 0) or TYPE[i].NAME (an argument of it).
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
		if r := refRange(sb, string(name)); r != nil {
			d.Subject = r
		}
	}
	return ds
}

// atProviderAttributes places the diagnostics a provider made about one
// argument of its own configuration (see providers.ProviderAttributeRef)
// at that argument's value in the block of the provider keyed key, when
// there is such a block in native syntax that sets it; the others are left
// as they are.
func (e *Engine) atProviderAttributes(ds hcl.Diagnostics, key string) hcl.Diagnostics {
	pc, ok := e.cfg.Providers[key]
	if !ok || pc == nil {
		return ds
	}
	sb, ok := pc.Config.(*hclsyntax.Body)
	if !ok {
		return ds
	}
	for _, d := range ds {
		if name, ok := d.Extra.(providers.ProviderAttributeRef); ok {
			if r := refRange(sb, string(name)); r != nil {
				d.Subject = r
			}
		}
	}
	return ds
}

// refRange returns the range in sb of what ref names (see atAttributes),
// or nil.
func refRange(sb *hclsyntax.Body, ref string) *hcl.Range {
	if a, ok := sb.Attributes[ref]; ok {
		r := a.Expr.Range()
		return &r
	}
	typ, rest, _ := strings.Cut(ref, ".")
	idx := 0
	if t, n, ok := strings.Cut(typ, "["); ok && strings.HasSuffix(n, "]") {
		i, err := strconv.Atoi(strings.TrimSuffix(n, "]"))
		if err != nil || i < 0 {
			return nil
		}
		typ, idx = t, i
	}
	for _, b := range sb.Blocks {
		if b.Type != typ {
			continue
		}
		if idx > 0 {
			idx--
			continue
		}
		if rest != "" {
			if r := refRange(b.Body, rest); r != nil {
				return r
			}
		}
		r := b.DefRange()
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
