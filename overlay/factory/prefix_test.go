package factory

import (
	"regexp"
	"strings"
	"testing"
)

// TestPrefix: every pool name, HCL's underscores included, gives a prefix
// of glidein IDs' characters, and no pool's prefix begins another's.
func TestPrefix(t *testing.T) {
	pools := []string{"campus", "Campus2", "campus-west", "campus_west", "campuswest", "more_workers",
		"a", "a-b", "a_b", "ab", strings.Repeat("x", 40), strings.Repeat("x", 41)}
	valid := regexp.MustCompile(`^pond-[a-z0-9]{1,26}-$`)
	for _, p := range pools {
		if got := Prefix(p); !valid.MatchString(got) {
			t.Errorf("Prefix(%q) = %q: not letters and digits between pond- and -", p, got)
		}
	}
	if got := Prefix("campus"); got != "pond-campus-" {
		t.Errorf(`Prefix("campus") = %q, want "pond-campus-"`, got)
	}
	for _, a := range pools {
		for _, b := range pools {
			if a != b && strings.HasPrefix(Prefix(b), Prefix(a)) {
				t.Errorf("the prefix of pool %q (%s) begins that of pool %q (%s)", a, Prefix(a), b, Prefix(b))
			}
		}
	}
}
