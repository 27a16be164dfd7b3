package providers

import (
	"errors"

	"github.com/hashicorp/hcl/v2"
)

// FromError returns err as diagnostics: none for a nil err, else one error
// whose Detail is err's text, left without a Summary for the planner to
// give it one naming the operation and the instance. When err is (or
// wraps) an ArgumentError, the diagnostic is about that argument.
func FromError(err error) hcl.Diagnostics {
	if err == nil {
		return nil
	}
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Detail: err.Error()}
	var ae *ArgumentError
	if errors.As(err, &ae) {
		d.Extra = AttributeRef(ae.Name)
	}
	return hcl.Diagnostics{d}
}

// ArgumentError is an error about the argument Name of the resource's
// configuration, whose text (Err's) already names it. FromError places it
// at that argument.
type ArgumentError struct {
	Name string
	Err  error
}

func (e *ArgumentError) Error() string { return e.Err.Error() }
func (e *ArgumentError) Unwrap() error { return e.Err }

// ArgError returns err as an ArgumentError about the argument name, or nil
// when err is nil.
func ArgError(name string, err error) error {
	if err == nil {
		return nil
	}
	return &ArgumentError{Name: name, Err: err}
}

// ProviderAttributeRef, as the Extra of a diagnostic of a resource's
// operation, names the argument of the configuration of the resource's
// provider that the diagnostic is about (a site's partition that does not
// exist), so that the planner places it at that argument of the provider
// block rather than at the resource.
type ProviderAttributeRef string

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
