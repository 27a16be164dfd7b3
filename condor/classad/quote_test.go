package classad

import "testing"

func TestQuoteString(t *testing.T) {
	for _, s := range []string{"", "plain", `with "quotes" and \ back`, "tab\tnl\n"} {
		q := QuoteString(s)
		back, err := UnquoteString(q)
		if err != nil || back != s {
			t.Errorf("UnquoteString(QuoteString(%q)) = %q, %v (quoted %s)", s, back, err, q)
		}
		if back, err := UnquoteString(String(s).String()); err != nil || back != s {
			t.Errorf("UnquoteString of the literal an ad writes for %q = %q, %v", s, back, err)
		}
	}
	for _, bad := range []string{`abc`, `"a"b"`, `"a\"`} {
		if _, err := UnquoteString(bad); err == nil {
			t.Errorf("UnquoteString(%s) accepted", bad)
		}
	}
}
