package startd

import (
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/config"
)

// TestUnsupportedPolicy checks that each startd policy expression pond
// does not carry out is warned about, by name, when set to anything but
// its default.
func TestUnsupportedPolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		set  map[string]string
		want []string // the knobs warned about
	}{
		{name: "defaults"},
		{name: "defaults written out", set: map[string]string{"SUSPEND": "False", "WANT_SUSPEND": "false", "CONTINUE": "TRUE", "KILL": "False"}},
		{name: "a suspension policy", set: map[string]string{"SUSPEND": "KeyboardIdle < 60", "CONTINUE": "KeyboardIdle > 300",
			"WANT_SUSPEND": "True"}, want: []string{"SUSPEND", "WANT_SUSPEND", "CONTINUE"}},
		{name: "KILL", set: map[string]string{"KILL": "(time() - EnteredCurrentActivity) > 60"}, want: []string{"KILL"}},
		{name: "a bad expression is warned about too", set: map[string]string{"SUSPEND": "KeyboardIdle <"}, want: []string{"SUSPEND"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.New(config.Options{})
			for k, v := range tc.set {
				cfg.Set(k, v)
			}
			got := unsupportedPolicy(cfg)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q; want one for each of %v", got, tc.want)
			}
			for i, k := range tc.want {
				if !strings.HasPrefix(got[i], k+" = ") || !strings.Contains(got[i], "not supported") {
					t.Errorf("warning %q; want one naming %s", got[i], k)
				}
			}
		})
	}
}
