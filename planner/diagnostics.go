package planner

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

func errDiag(summary string, err error, subject *hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: err.Error(), Subject: subject}
}

// panicDiag reports a panic while planning or applying v.
func panicDiag(v string, r any, stack []byte) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Internal error while handling " + v,
		Detail:   fmt.Sprintf("%v\n\nThis is a bug in pond or one of its providers; please report it with this trace:\n\n%s", r, stack),
	}
}
