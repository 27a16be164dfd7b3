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
