package local

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestLendersFirstArgument checks the pool's lenders_first: set, it
// reaches the nodes' configuration as POND_LENDERS_FIRST, before the knobs
// of config, which override it; unset, nothing is written.
func TestLendersFirstArgument(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		want  []string // POND_LENDERS_FIRST lines, in order
	}{
		{"unset", nil, nil},
		{"true", map[string]cty.Value{"lenders_first": cty.True}, []string{"POND_LENDERS_FIRST = true"}},
		{"false", map[string]cty.Value{"lenders_first": cty.False}, []string{"POND_LENDERS_FIRST = false"}},
		{"config overrides", map[string]cty.Value{"lenders_first": cty.False,
			"config": cty.MapVal(map[string]cty.Value{"POND_LENDERS_FIRST": cty.StringVal("true")})},
			[]string{"POND_LENDERS_FIRST = false", "POND_LENDERS_FIRST = true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := specOf(poolConfig(tc.attrs))
			if err != nil {
				t.Fatal(err)
			}
			if tc.attrs == nil && sp.LendersFirst != nil {
				t.Errorf("lenders_first unset: spec has %v", *sp.LendersFirst)
			}
			dir := t.TempDir()
			p := &Provider{gossipKey: func() (string, error) { return "", nil }}
			if err := p.writeNodeConfig(dir, launchReq{spec: sp, address: "pool.p"}); err != nil {
				t.Fatal(err)
			}
			conf := readTestFile(t, filepath.Join(dir, ConfigFileName))
			var got []string
			for _, line := range strings.Split(conf, "\n") {
				if strings.HasPrefix(line, "POND_LENDERS_FIRST") {
					got = append(got, line)
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("configuration file:\n%s\nwant the lines %q", conf, tc.want)
			}
		})
	}
}
