package sea

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
)

// TestPondJobIDs checks a pond's job_ids: the ids the invitation carries
// (stamped on the members as PondJobIds), and the errors, at the
// argument, for ids that are not CLUSTER.PROC and for too many.
func TestPondJobIDs(t *testing.T) {
	t.Parallel()
	ids := func(s ...string) cty.Value {
		vs := make([]cty.Value, len(s))
		for i, x := range s {
			vs[i] = cty.StringVal(x)
		}
		if len(vs) == 0 {
			return cty.ListValEmpty(cty.String)
		}
		return cty.ListVal(vs)
	}
	many := make([]string, maxJobIDs+1)
	for i := range many {
		many[i] = "1.0"
	}
	for _, tc := range []struct {
		name string
		ids  cty.Value
		want []string
		err  string
	}{
		{name: "none", ids: cty.NullVal(cty.List(cty.String))},
		{name: "empty", ids: ids()},
		{name: "two", ids: ids("12.0", "12.3"), want: []string{"12.0", "12.3"}},
		{name: "no proc", ids: ids("12"), err: `job_ids: "12" is not a job id`},
		{name: "a list", ids: ids("1.0,1.1"), err: `job_ids: "1.0,1.1" is not a job id`},
		{name: "too many", ids: ids(many...), err: "job_ids: 1001 job ids: at most 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := providertest.Object(pondSchema, map[string]cty.Value{
				"central_manager": cty.StringVal("127.0.0.1:9618"),
				"requirements":    cty.StringVal("true"),
				"job_ids":         tc.ids,
			})
			if err != nil {
				t.Fatal(err)
			}
			verr := providers.Err(New().ValidateResourceConfig(context.Background(), providers.ValidateRequest{TypeName: "pond", Config: cfg}).Diagnostics)
			inv, ierr := (&Provider{}).invitation(cfg, "burst", "id-1")
			if tc.err != "" {
				if verr == nil || !strings.Contains(verr.Error(), tc.err) {
					t.Errorf("validate: %v, want an error containing %q", verr, tc.err)
				}
				if ierr == nil || !strings.Contains(ierr.Error(), tc.err) {
					t.Errorf("invitation: %v, want an error containing %q", ierr, tc.err)
				}
				return
			}
			if verr != nil || ierr != nil {
				t.Fatal(verr, ierr)
			}
			if !slices.Equal(inv.JobIDs, tc.want) {
				t.Errorf("invitation's job ids %q, want %q", inv.JobIDs, tc.want)
			}
		})
	}
}
