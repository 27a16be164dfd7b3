package providers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOverCap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    []Growth
		worst string
		parts []string
	}{
		{"none", nil, "", nil},
		{"one", []Growth{{"pool.a", 3, 1}}, "pool.a", []string{"pool.a 3"}},
		{"most growth", []Growth{{"pool.b", 5, 1}, {"pool.a", 2, 0}, {"pool.c", 9, 4}}, "pool.c", []string{"pool.a 2", "pool.b 5", "pool.c 9"}},
		{"tie by address", []Growth{{"pool.z", 5, 2}, {"pool.m", 1, 2}}, "pool.m", []string{"pool.m 1", "pool.z 5"}},
		{"shrinking", []Growth{{"pool.x", 1, -2}, {"pool.y", 4, -1}}, "pool.y", []string{"pool.x 1", "pool.y 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			worst, parts := OverCap(tc.in)
			if worst != tc.worst {
				t.Errorf("worst = %q, want %q", worst, tc.worst)
			}
			if d := cmp.Diff(tc.parts, parts); d != "" {
				t.Errorf("parts (-want +got):\n%s", d)
			}
		})
	}
}
