//go:build !race

package classad

import "testing"

// The race detector makes sync.Pool drop items at random, so allocation
// counts mean nothing under it: this file is left out of -race builds, and
// make allocs runs it without the detector.

// TestRequirementsZeroAllocs: evaluating a compiled Requirements, a
// symmetric match and a rank allocate nothing.
func TestRequirementsZeroAllocs(t *testing.T) {
	job, machine := benchAds(t)
	p, err := Compile(benchRequirements)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMatcher(job)
	p.EvalBool(job, machine)
	cases := []struct {
		name string
		f    func()
	}{
		{"Program.EvalBool", func() { p.EvalBool(job, machine) }},
		{"Matcher.SymmetricMatch", func() { m.SymmetricMatch(machine) }},
		{"Matcher.Rank", func() { m.Rank(machine) }},
	}
	for _, c := range cases {
		if n := testing.AllocsPerRun(200, c.f); n != 0 {
			t.Errorf("%s: %v allocations per evaluation, want 0", c.name, n)
		}
	}
}
