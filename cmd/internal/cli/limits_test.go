package cli

import (
	"strings"
	"testing"
)

// TestLimitsAtTheirLine checks that plan refuses what the local provider's
// limits forbid, with the error at the argument's line and column, saying
// the limit and how to raise it; that max_nodes counts the nodes of every
// pool together; and that the provider block sets both limits.
func TestLimitsAtTheirLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string // in the error output; none for a plan that passes
	}{
		{"nodes", `pool "big" {
  slots = 2
  nodes = 100000
}
`, []string{"Error: Too many nodes", "main.pond.hcl line 3", `3:   nodes = 100000`,
			"nodes = 100000 is more than the local provider allows (max_nodes = 64)", `raise max_nodes in the provider "local" block`}},
		{"slots", `pool "wide" {
  slots = 1000000
}
`, []string{"Error: Too many slots", "main.pond.hcl line 2", `2:   slots = 1000000`,
			"slots = 1000000 is more than the local provider allows (max_slots_per_node = 256)", "raise max_slots_per_node"}},
		{"pools together", `pool "a" {
  nodes = 40
}

pool "b" {
  nodes = 30
}
`, []string{"Error: Too many nodes", "main.pond.hcl line 2", `2:   nodes = 40`,
			"would run 70 nodes in all (pool.a 40, pool.b 30)", "max_nodes = 64", `raise max_nodes in the provider "local" block`}},
		{"count together", `pool "w" {
  count = 3
  nodes = 30
}
`, []string{"Error: Too many nodes", "main.pond.hcl line 3", `3:   nodes = 30`,
			"would run 90 nodes in all (pool.w[0] 30, pool.w[1] 30, pool.w[2] 30)"}},
		{"raised", `provider "local" {
  max_nodes          = 100
  max_slots_per_node = 2000
}

pool "a" {
  nodes = 40
  slots = 1000
}

pool "b" {
  nodes = 40
}
`, nil},
		{"lowered", `provider "local" {
  max_nodes = 4
}

pool "a" {
  nodes = 3
}

pool "b" {
  nodes = 2
}
`, []string{"Error: Too many nodes", "main.pond.hcl line 6", `6:   nodes = 3`, "would run 5 nodes in all", "max_nodes = 4"}},
		{"lowered slots", `provider "local" {
  max_slots_per_node = 4
}

pool "a" {
  slots = 5
}
`, []string{"Error: Too many slots", "main.pond.hcl line 6", "slots = 5 is more than the local provider allows (max_slots_per_node = 4)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := configDir(t, tc.src)
			code, stdout, stderr := pondctl(t, dir, nil, "plan", "-input=false", "-no-color")
			if tc.want == nil {
				if code != 0 {
					t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
				}
				return
			}
			if code != 1 {
				t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}
