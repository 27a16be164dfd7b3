package classad

import "testing"

// TestHTCondorScoping checks name resolution against what HTCondor 25's
// library (with htcondor2 loaded, as classad_eval runs) gives for the same
// expressions (see docs/compatibility.md).
func TestHTCondorScoping(t *testing.T) {
	my := `[ a = 3; n = [ p = 1; k = [ m = p ] ]; cyc = cyc + 1 ]`
	target := `[ a = 10; ti = 5; lt = { a, MY.a } ]`
	tests := []struct {
		expr   string
		target bool
		want   string
	}{
		{"n.MY.p", false, "1"},
		{"n.SELF.p", false, "1"},
		{"n.k.PARENT.PARENT.a", false, "3"},
		{"n.TARGET.ti", true, "5"},
		{"TARGET.TARGET.a", true, "3"},
		{"MY.TARGET.a", true, "10"},
		{"SELF.a", false, "3"},
		{"[ x = a ].x", false, "3"},
		{"[ x = PARENT.a ].x", false, "3"},
		{"[ a = 1 ].MY.a", false, "1"},
		{"cyc", false, "undefined"},
		{".a", false, "3"},
		{".MY.a", false, "3"},
		// In a match the outermost ad is HTCondor's match ad.
		{".a", true, "undefined"},
		{".LEFT.a", true, "3"},
		{".RIGHT.a", true, "10"},
		{".SELF.a", true, "undefined"},
		{"PARENT", true, "[ ad = .LEFT; my = .LEFT; other = .RIGHT; target = .RIGHT ]"},
		{"PARENT", false, "undefined"},
		{"TARGET.PARENT.my.a", true, "10"},
		// A list's elements are evaluated where a function uses them,
		// but an index evaluates one in the list's own ad.
		{"TARGET.lt", true, "{ a,MY.a }"},
		{"sum(TARGET.lt)", true, "6"},
		{"member(10, TARGET.lt)", true, "false"},
		{"TARGET.lt[0]", true, "10"},
		{`join(",", TARGET.lt)`, true, `"3,3"`},
	}
	myAd, err := ParseNewAd(my)
	if err != nil {
		t.Fatal(err)
	}
	tgAd, err := ParseNewAd(target)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		e, err := ParseExpr(tt.expr)
		if err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		var tg *Ad
		if tt.target {
			tg = tgAd
		}
		if got := EvalWith(e, myAd, tg).String(); got != tt.want {
			t.Errorf("%s (target %v) = %s, want %s", tt.expr, tt.target, got, tt.want)
		}
	}
}

// TestRecordLiteralAsContext evaluates in an ad nested in a record
// literal: the literal's names must not resolve back into the ad nested
// in it (which would loop).
func TestRecordLiteralAsContext(t *testing.T) {
	e, err := ParseExpr(`[ a = 1; n = [ b = 2 ] ].n`)
	if err != nil {
		t.Fatal(err)
	}
	inner, ok := EvalWith(e, NewAd(), nil).AdValue()
	if !ok {
		t.Fatal("not an ad")
	}
	for src, want := range map[string]string{"b": "2", "a": "1", "missing": "undefined", ".a": "1", "PARENT.a": "1"} {
		x, err := ParseExpr(src)
		if err != nil {
			t.Fatal(err)
		}
		if got := EvalWith(x, inner, nil).String(); got != want {
			t.Errorf("%s = %s, want %s", src, got, want)
		}
	}
}
