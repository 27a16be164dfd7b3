package providers

import (
	"errors"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

func TestDiagnosticHelpers(t *testing.T) {
	if d := FromError(nil); d != nil {
		t.Errorf("FromError(nil) = %v, want nil", d)
	}
	d := FromError(errors.New("nodes: must be at least 1"))
	if len(d) != 1 || d[0].Severity != hcl.DiagError || d[0].Summary != "" || d[0].Detail != "nodes: must be at least 1" {
		t.Errorf("FromError = %#v", d)
	}
	for _, tt := range []struct {
		name  string
		diags hcl.Diagnostics
		want  string
	}{
		{"none", nil, ""},
		{"warnings only", hcl.Diagnostics{Warning("Few nodes", "only 1")}, ""},
		{"from an error", d, "nodes: must be at least 1"},
		{"summary and detail", hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Bad", Detail: "very"}}, "Bad: very"},
		{"summary only", hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Bad"}}, "Bad"},
		{"several", append(hcl.Diagnostics{Warning("w", "")}, append(d, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Bad"})...), "nodes: must be at least 1\nBad"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Err(tt.diags)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Err = %v, want nil", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Fatalf("Err = %v, want %q", err, tt.want)
			}
		})
	}
}
