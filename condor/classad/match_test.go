package classad

import "testing"

// Cases checked against HTCondor's ClassAd.symmetricMatch, except the
// bare-name ones, which follow HTCondor's default (non-strict) evaluation
// where a name missing from MY is looked up in TARGET.
func TestMatch(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"[Requirements = true]", "[]", false},
		{"[Requirements = 1]", "[Requirements = true]", true},
		{"[Requirements = 2.5]", "[Requirements = true]", true},
		{"[Requirements = 0]", "[Requirements = true]", false},
		{"[]", "[Requirements = true]", false},
		{"[Requirements = undefined]", "[Requirements = true]", false},
		{`[Requirements = "true"]`, "[Requirements = true]", false},
		{"[Requirements = TARGET.Memory > 1]", "[Memory = 2; Requirements = true]", true},
		{"[x = 1; Requirements = TARGET.y == x]", "[y = 1; Requirements = TARGET.x == y]", true},
		{"[x = 1; Requirements = TARGET.y == x]", "[y = 2; Requirements = TARGET.x == y]", false},
		{"[Requirements = Memory > 1]", "[Memory = 2; Requirements = true]", true},
		{"[Requirements = a; a = b; b = a]", "[Requirements = true]", false},
		{"[Requirements = TARGET.Requirements]", "[Requirements = TARGET.Requirements]", false},
	}
	for _, tt := range tests {
		a, err := ParseAd(tt.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseAd(tt.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := Match(a, b); got != tt.want {
			t.Errorf("Match(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := NewMatcher(a).SymmetricMatch(b); got != tt.want {
			t.Errorf("Matcher(%s).SymmetricMatch(%s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestRank(t *testing.T) {
	job, machine := benchAds(t)
	if got := Rank(job, machine); got != 16384 {
		t.Errorf("job rank = %v, want 16384", got)
	}
	if got := Rank(machine, job); got != 10 {
		t.Errorf("machine rank = %v, want 10", got)
	}
	if got := NewMatcher(job).Rank(machine); got != 16384 {
		t.Errorf("matcher rank = %v", got)
	}
	if got := Rank(NewAd(), machine); got != 0 {
		t.Errorf("missing rank = %v, want 0", got)
	}
}

func TestEvalAttrWith(t *testing.T) {
	job, machine := benchAds(t)
	if b, ok := machine.EvalAttrWith("requirements", job).BoolValue(); !ok || !b {
		t.Errorf("machine Requirements vs job = %v", machine.EvalAttrWith("requirements", job))
	}
	if v := machine.EvalAttrWith("Rank", job); v.String() != "10" {
		t.Errorf("machine Rank = %v", v)
	}
	if v := machine.EvalAttr("Rank"); !v.IsUndefined() && v.String() != "0" {
		t.Errorf("machine Rank without target = %v", v)
	}
}
