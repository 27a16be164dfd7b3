package sea

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
)

// TestPondDrainArguments checks the pond's drain and drain_timeout: what a
// release asks of the members, and the errors for values that are not.
func TestPondDrainArguments(t *testing.T) {
	base := map[string]cty.Value{
		"central_manager": cty.StringVal("127.0.0.1:9618"),
		"requirements":    cty.StringVal("true"),
	}
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		want  api.Drain
		err   string
	}{
		{name: "default waits", want: api.Drain{Mode: api.DrainWait}},
		{name: "wait with a timeout", attrs: map[string]cty.Value{"drain": cty.StringVal("wait"), "drain_timeout": cty.StringVal("90s")},
			want: api.Drain{Mode: api.DrainWait, Timeout: 90 * time.Second}},
		{name: "evict", attrs: map[string]cty.Value{"drain": cty.StringVal("evict")}, want: api.Drain{Mode: api.DrainEvict}},
		{name: "unknown mode", attrs: map[string]cty.Value{"drain": cty.StringVal("graceful")}, err: `drain: drain mode "graceful": want "wait" or "evict"`},
		{name: "bad timeout", attrs: map[string]cty.Value{"drain_timeout": cty.StringVal("soon")}, err: `drain_timeout: "soon" is not a positive duration`},
		{name: "zero timeout", attrs: map[string]cty.Value{"drain_timeout": cty.StringVal("0s")}, err: `drain_timeout: "0s" is not a positive duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := map[string]cty.Value{}
			for k, v := range base {
				attrs[k] = v
			}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			cfg, err := providertest.Object(pondSchema, attrs)
			if err != nil {
				t.Fatal(err)
			}
			verr := providers.Err(New().ValidateResourceConfig(context.Background(), providers.ValidateRequest{TypeName: "pond", Config: cfg}).Diagnostics)
			if tc.err != "" {
				if verr == nil || !strings.Contains(verr.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", verr, tc.err)
				}
				return
			}
			if verr != nil {
				t.Fatal(verr)
			}
			if got := drainOf(cfg); got != tc.want {
				t.Fatalf("drain = %+v, want %+v", got, tc.want)
			}
		})
	}
}
