package knobs

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite docs/knobs.md from the table")

// docsPath is docs/knobs.md, from this package's directory.
var docsPath = filepath.Join("..", "..", "docs", "knobs.md")

// The generated part of docs/knobs.md lies between these lines.
const (
	beginTable = "<!-- The table is generated from overlay/knobs: edit it there and run `go test ./overlay/knobs -update`. -->\n"
	endTable   = "<!-- End of the generated table. -->\n"
)

// markdownTable renders knobs as the table of docs/knobs.md.
func markdownTable(knobs []Knob) string {
	var b strings.Builder
	b.WriteString("| Knob | Type | Default | Flag | What it sets |\n")
	b.WriteString("|------|------|---------|------|--------------|\n")
	code := func(s string) string {
		if s == "" {
			return ""
		}
		return "`" + s + "`"
	}
	for _, k := range knobs {
		typ := string(k.Type)
		if k.Positive {
			typ += " > 0"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", code(k.Name), typ, code(k.Default), code(k.Flag), k.Doc)
	}
	return b.String()
}

// TestDocs fails when docs/knobs.md does not show the table; go test
// ./overlay/knobs -update rewrites it.
func TestDocs(t *testing.T) {
	doc, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok1 := bytes.Cut(doc, []byte(beginTable))
	_, tail, ok2 := bytes.Cut(rest, []byte(endTable))
	if !ok1 || !ok2 {
		t.Fatalf("%s: no generated table (between %q and %q)", docsPath, strings.TrimSpace(beginTable), strings.TrimSpace(endTable))
	}
	want := string(head) + beginTable + markdownTable(All()) + endTable + string(tail)
	if string(doc) == want {
		return
	}
	if *update {
		if err := os.WriteFile(docsPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", docsPath)
		return
	}
	t.Errorf("%s does not show the knobs of the table; run go test ./overlay/knobs -update", docsPath)
}

func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range All() {
		if !strings.HasPrefix(k.Name, "POND_") || k.Name != strings.ToUpper(k.Name) || strings.ContainsAny(k.Name, " \t=") {
			t.Errorf("%q: want POND_ and upper case", k.Name)
		}
		if seen[k.Name] {
			t.Errorf("%s: listed twice", k.Name)
		}
		seen[k.Name] = true
		if k.Doc == "" || strings.ContainsAny(k.Doc, "|\n") || !strings.HasSuffix(k.Doc, ".") {
			t.Errorf("%s: doc %q: want one sentence on one line, without |", k.Name, k.Doc)
		}
		if k.Positive && k.Type != TypeInt && k.Type != TypeDuration {
			t.Errorf("%s: only numbers and durations can be positive", k.Name)
		}
		if got, ok := Lookup(strings.ToLower(k.Name)); !ok || got != k {
			t.Errorf("Lookup(%s) = %+v, %v", k.Name, got, ok)
		}
		// Every default reads back through its type.
		unset := Reader(func(string) (string, bool) { return "", false })
		var err error
		switch k.Type {
		case TypeString:
			_, err = unset.String(k.Name)
		case TypeBool:
			_, err = unset.Bool(k.Name)
		case TypeInt:
			_, err = unset.Int(k.Name)
		case TypeDuration:
			_, err = unset.Duration(k.Name)
		case TypeList:
			_, err = unset.List(k.Name)
		case TypeExpr:
			_, err = unset.Expr(k.Name)
		default:
			err = fmt.Errorf("unknown type %q", k.Type)
		}
		if err != nil {
			t.Errorf("%s: default %q: %v", k.Name, k.Default, err)
		}
	}
	if _, ok := Lookup("POND_NO_SUCH_KNOB"); ok {
		t.Errorf("Lookup found a knob not in the table")
	}
	all := All()
	all[0].Name = "changed"
	if All()[0].Name == "changed" {
		t.Errorf("All returns the table itself")
	}
}

func TestReader(t *testing.T) {
	knobs := map[string]string{
		Policy: " yes ", PolicyMaxMembers: "8", PolicyMaxPonds: "0", PolicyGrace: "10",
		PolicyQueryInterval: "soon", PolicyCheckInterval: "0s", OrphanTimeout: " ",
		Join: "a:1, b:2 c:3", PolicyRequirements: `Site == "sea"`, JoinPolicy: "Memory >",
		Name: "  n1 ",
	}
	r := Reader(func(name string) (string, bool) { v, ok := knobs[name]; return v, ok })
	check := func(what string, got any, err error, want any, wantErr string) {
		t.Helper()
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("%s: %v, %v; want an error containing %q", what, got, err, wantErr)
			}
			return
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, %v; want %v", what, got, err, want)
		}
	}
	b, err := r.Bool(Policy)
	check("set bool", b, err, true, "")
	n, err := r.Int(PolicyMaxMembers)
	check("set int", n, err, 8, "")
	n, err = r.Int(PolicyMaxPonds)
	check("int below its least", n, err, 0, `POND_POLICY_MAX_PONDS = "0": want a whole number of at least 1`)
	d, err := r.Duration(PolicyGrace)
	check("seconds", d, err, 10*time.Second, "")
	d, err = r.Duration(PolicyQueryInterval)
	check("bad duration", d, err, 0, `POND_POLICY_QUERY_INTERVAL = "soon": want a duration`)
	d, err = r.Duration(PolicyCheckInterval)
	check("zero positive duration", d, err, 0, `POND_POLICY_CHECK_INTERVAL = "0s": must be more than zero`)
	d, err = r.Duration(OrphanTimeout)
	check("blank takes the default", d, err, 30*time.Second, "")
	d, err = r.Duration(PolicyNegotiatorMinInterval)
	check("unset takes the default", d, err, time.Duration(0), "")
	l, err := r.List(Join)
	check("list", l, err, []string{"a:1", "b:2", "c:3"}, "")
	e, err := r.Expr(PolicyRequirements)
	check("expression", e, err, `Site == "sea"`, "")
	e, err = r.Expr(JoinPolicy)
	check("bad expression", e, err, "", `POND_JOIN_POLICY = "Memory >"`)
	s, err := r.String(Name)
	check("string", s, err, "n1", "")
	s, err = r.String(Bind)
	check("string default", s, err, "127.0.0.1:7946", "")
	_, err = r.Int(PolicyGrace)
	check("wrong type", nil, err, nil, "POND_POLICY_GRACE is of type duration, not int")
	_, err = r.String("POND_NO_SUCH_KNOB")
	check("unknown knob", nil, err, nil, "POND_NO_SUCH_KNOB is not a knob")
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"1.5s", 1500 * time.Millisecond, ""},
		{"2m", 2 * time.Minute, ""},
		{"30", 30 * time.Second, ""},
		{" 0.5 ", 500 * time.Millisecond, ""},
		{"0", 0, ""},
		{"-1s", 0, "must not be negative"},
		{"-3", 0, "must not be negative"},
		{"", 0, "want a duration"},
		{"soon", 0, "want a duration"},
		{"NaN", 0, "want a duration"},
		{"Inf", 0, "want a duration"},
		{"1e300", 0, "want a duration"},
	} {
		got, err := ParseDuration(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseDuration(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseBool(t *testing.T) {
	for in, want := range map[string]bool{"true": true, "YES": true, " on ": true, "1": true, "t": true, "y": true,
		"false": false, "No": false, "off": false, "0": false, "": false, "f": false, "n": false} {
		if got, err := ParseBool(in); err != nil || got != want {
			t.Errorf("ParseBool(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"maybe", "2", "truee"} {
		if _, err := ParseBool(in); err == nil {
			t.Errorf("ParseBool(%q): no error", in)
		}
	}
}

func TestParseInt(t *testing.T) {
	for in, want := range map[string]int{"0": 0, " 16 ": 16, "-2": -2} {
		if got, err := ParseInt(in); err != nil || got != want {
			t.Errorf("ParseInt(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1.5", "ten", "0x10", "99999999999999999999"} {
		if _, err := ParseInt(in); err == nil {
			t.Errorf("ParseInt(%q): no error", in)
		}
	}
}

func TestParseList(t *testing.T) {
	for in, want := range map[string]string{"": "", "a": "a", "a,b": "a b", " a , b\tc\n": "a b c", ",,": ""} {
		if got := strings.Join(ParseList(in), " "); got != want {
			t.Errorf("ParseList(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"1.5s", "30", "-1", "NaN", "1e300", "9223372036.854775807", "2562047h47m16.854775807s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := ParseDuration(s); err == nil && d < 0 {
			t.Fatalf("ParseDuration(%q) = %v", s, d)
		}
	})
}

func TestIsSecret(t *testing.T) {
	for name, want := range map[string]bool{
		"POND_ENCRYPT": true, "POOL_PASSWORD": true, "SEC_PASSWORD_FILE": true, "SEC_TOKEN_DIRECTORY": true,
		"MY_SECRET": true, "SIGNING_KEY": true, "pool_password": true,
		"POND_POOL": false, "CONDOR_HOST": false, "POND_JOIN": false, "KEYBOARD_IDLE": false, "NUM_CPUS": false,
	} {
		if got := IsSecret(name); got != want {
			t.Errorf("IsSecret(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestHidden checks that the knobs POND_SECRET_KNOBS names are hidden, in
// any case, beside those IsSecret recognises.
func TestHidden(t *testing.T) {
	all := map[string]string{
		"pond_secret_knobs": "DB_CONN, api_credential",
		"DB_CONN":           "postgres://u:p@h/db",
		"API_CREDENTIAL":    "xyz",
		"POOL_PASSWORD":     "pw",
		"NUM_CPUS":          "4",
	}
	hidden := Hidden(all)
	for name, want := range map[string]bool{
		"DB_CONN": true, "db_conn": true, "API_CREDENTIAL": true, "POOL_PASSWORD": true,
		"pond_secret_knobs": true, "NUM_CPUS": false, "CONDOR_HOST": false,
	} {
		if got := hidden(name); got != want {
			t.Errorf("hidden(%q) = %v, want %v", name, got, want)
		}
	}
	if Hidden(map[string]string{"NUM_CPUS": "4"})("DB_CONN") {
		t.Error("DB_CONN hidden without POND_SECRET_KNOBS")
	}
}
