package classad

import "testing"

// TestAttrCompare checks which comparisons a query planner may read as
// "an attribute of the ad, compared with a literal".
func TestAttrCompare(t *testing.T) {
	for _, tc := range []struct {
		src, attr, op, lit string // attr "" when not such a comparison
	}{
		{"ClusterId == 5", "ClusterId", "==", "5"},
		{"(MY.ProcId) != 2", "ProcId", "!=", "2"},
		{"5 < ClusterId", "ClusterId", ">", "5"},
		{"5 >= ClusterId", "ClusterId", "<=", "5"},
		{`Owner is "x"`, "Owner", "is", `"x"`},
		{`((Owner =!= "x"))`, "Owner", "isnt", `"x"`},
		{"TARGET.ClusterId == 5", "", "", ""},
		{".ClusterId == 5", "", "", ""},
		{"foo.ClusterId == 5", "", "", ""},
		{"MY == 5", "", "", ""},
		{"ClusterId == ProcId", "", "", ""},
		{"ClusterId + 1 == 5", "", "", ""},
		{"ClusterId && 5", "", "", ""},
		{"f(ClusterId) == 5", "", "", ""},
	} {
		e := MustParseExpr(tc.src)
		attr, op, lit, ok := AttrCompare(e)
		if ok != (tc.attr != "") || attr != tc.attr || op != tc.op || ok && lit.String() != tc.lit {
			t.Errorf("AttrCompare(%s) = %q, %q, %v, %v; want %q, %q, %s", tc.src, attr, op, lit, ok, tc.attr, tc.op, tc.lit)
		}
	}
}

// TestLogic checks that Logic splits && and || through parentheses only.
func TestLogic(t *testing.T) {
	for _, tc := range []struct{ src, op, x, y string }{
		{"a && b", "&&", "a", "b"},
		{"((a || b))", "||", "a", "b"},
		{"a && b || c", "||", "a && b", "c"},
		{"!(a && b)", "", "", ""},
		{"a == b", "", "", ""},
	} {
		op, x, y, ok := Logic(MustParseExpr(tc.src))
		if ok != (tc.op != "") || op != tc.op || ok && (x.String() != tc.x || y.String() != tc.y) {
			t.Errorf("Logic(%s) = %q, %v, %v, %v; want %q, %s, %s", tc.src, op, x, y, ok, tc.op, tc.x, tc.y)
		}
	}
}
