package classad

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReferences(t *testing.T) {
	tests := []struct {
		expr       string
		my, target []string
	}{
		{benchRequirements, []string{"requestmemory"}, []string{"arch", "machine", "memory"}},
		{"a + b.c + MY.D", []string{"a", "b", "d"}, []string{}},
		{"TARGET.x[y] ?: f(z, {w})", []string{"w", "y", "z"}, []string{"x"}},
		{"1 + 2", []string{}, []string{}},
	}
	for _, tt := range tests {
		my, target := References(MustParseExpr(tt.expr))
		if !cmp.Equal(my, tt.my) || !cmp.Equal(target, tt.target) {
			t.Errorf("References(%s) = %v, %v; want %v, %v", tt.expr, my, target, tt.my, tt.target)
		}
	}
}

// TestConcurrentEvaluation evaluates shared programs and ads from many
// goroutines; run with -race.
func TestConcurrentEvaluation(t *testing.T) {
	job, machine := benchAds(t)
	p, err := Compile(benchRequirements)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMatcher(job)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				if !p.EvalBool(job, machine) || !m.SymmetricMatch(machine) || !Match(machine, job) {
					t.Error("match failed under concurrency")
					return
				}
				if v := EvalWith(MustParseExpr(`regexp(strcat("^", "node"), TARGET.Machine)`), job, machine); !v.IsTrue() {
					t.Error("dynamic regexp failed")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestConjuncts(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{"a && (b && c) && (d || e)", []string{"a", "b", "c", "(d || e)"}},
		{"((a && b))", []string{"a", "b"}},
		{"((a || b))", []string{"((a || b))"}},
		{"(a && b)", []string{"a", "b"}},
		{"a || b && c", []string{"a || b && c"}},
		{"x", []string{"x"}},
	}
	for _, tt := range tests {
		e, err := ParseExpr(tt.expr)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range Conjuncts(e) {
			got = append(got, c.String())
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("Conjuncts(%q) (-want +got):\n%s", tt.expr, d)
		}
	}
}

// TestConjunctsAgree checks that a conjunction is true exactly when every
// conjunct is, for every combination of true, false, undefined, error and
// numbers.
func TestConjunctsAgree(t *testing.T) {
	vals := []string{"true", "false", "undefined", "error", "0", "2", "0.0", `"s"`}
	for _, a := range vals {
		for _, b := range vals {
			for _, c := range vals {
				e, err := ParseExpr(a + " && (" + b + " && " + c + ")")
				if err != nil {
					t.Fatal(err)
				}
				whole := CompileExpr(e).EvalBool(nil, nil)
				all := true
				for _, x := range Conjuncts(e) {
					all = all && CompileExpr(x).EvalBool(nil, nil)
				}
				if whole != all {
					t.Errorf("%s: whole %v, conjuncts %v", e, whole, all)
				}
			}
		}
	}
}

func TestAttrNames(t *testing.T) {
	tests := []struct {
		expr   string
		names  []string
		opaque bool
	}{
		{"TARGET.Memory >= RequestMemory && MY.Disk > .Abs", []string{"abs", "disk", "memory", "requestmemory"}, false},
		{"Machine.Sub.x[i] ?: f(z, {w})", []string{"i", "machine", "sub", "w", "x", "z"}, false},
		{"[a = b; c = 1].a", []string{"a", "b", "c"}, false},
		{`eval("Memory") > 1`, []string{}, true},
		{"isUndefined(TARGET)", []string{}, true},
		{"1 + 2", []string{}, false},
	}
	for _, tt := range tests {
		e, err := ParseExpr(tt.expr)
		if err != nil {
			t.Fatal(err)
		}
		names, opaque := AttrNames(e)
		if opaque != tt.opaque || (!opaque && !cmp.Equal(names, tt.names)) {
			t.Errorf("AttrNames(%q) = %v, %v; want %v, %v", tt.expr, names, opaque, tt.names, tt.opaque)
		}
	}
}
