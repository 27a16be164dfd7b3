package api

import "testing"

func TestParseAttrValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{"1", int64(1)},
		{"-42", int64(-42)},
		{"2.5", 2.5},
		{"1e3", 1000.0},
		{"true", true},
		{"FALSE", false},
		{`"quoted"`, "quoted"},
		{`"with \"escapes\""`, `with "escapes"`},
		{"campus", "campus"},
		{"NaN", "NaN"},
		{"Inf", "Inf"},
		{"0x10", "0x10"},
		{"", ""},
	} {
		if got := ParseAttrValue(tc.in); got != tc.want {
			t.Errorf("ParseAttrValue(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func FuzzParseAttrValue(f *testing.F) {
	for _, s := range []string{"1", "2.5", "true", `"x"`, "campus", "1e400", `"unterminated`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		switch v := ParseAttrValue(s).(type) {
		case int64, float64, bool:
		case string:
			if len(v) > len(s) {
				t.Fatalf("string value %q longer than input %q", v, s)
			}
		default:
			t.Fatalf("unexpected type %T", v)
		}
	})
}

func TestValidAttrName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"Cpus", true}, {"_x1", true}, {"HasMatlab", true},
		{"", false}, {"1x", false}, {"a-b", false}, {"a.b", false}, {"é", false},
	} {
		if got := ValidAttrName(tc.in); got != tc.want {
			t.Errorf("ValidAttrName(%q) = %v", tc.in, got)
		}
	}
}
