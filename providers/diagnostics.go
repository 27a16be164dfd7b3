package providers

import (
	"errors"

	"github.com/hashicorp/hcl/v2"
)

// FromError returns err as diagnostics: none for a nil err, else one error
// whose Detail is err's text, left without a Summary for the planner to
// give it one naming the operation and the instance.
func FromError(err error) hcl.Diagnostics {
	if err == nil {
		return nil
	}
	return hcl.Diagnostics{{Severity: hcl.DiagError, Detail: err.Error()}}
}

// AttributeRef, as the Extra of a diagnostic, names the argument of the
// resource's configuration the diagnostic is about, so that the planner
// places it at that argument rather than at the block.
type AttributeRef string

// AttributeError returns an error diagnostic about the argument name, with
// err's text as its Detail.
func AttributeError(name string, err error) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Detail: err.Error(), Extra: AttributeRef(name)}
}

// Warning returns a warning diagnostic.
func Warning(summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: detail}
}

// Err returns the errors among diags as one error ("summary: detail" each),
// or nil when there are none. Warnings are left out.
func Err(diags hcl.Diagnostics) error {
	var errs []error
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		switch {
		case msg == "":
			msg = d.Detail
		case d.Detail != "":
			msg += ": " + d.Detail
		}
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}
