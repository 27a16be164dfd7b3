package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestRaw(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"a":[1,2.5e3,-0,"x\u00e9\n"],"b":{"c":null,"d":true,"e":false}}`, true},
		{` [ ] `, true},
		{`{"a":1,}`, false},
		{`[1 2]`, false},
		{`"\x"`, false},
		{`"\u12G4"`, false},
		{`01`, false},
		{`1.`, false},
		{`-`, false},
		{"\"a\x01\"", false},
		{`tru`, false},
	} {
		s := New([]byte(tc.in))
		_, ok := s.Raw()
		ok = ok && s.Done()
		if ok != tc.ok {
			t.Errorf("Raw(%q) ok = %v, want %v", tc.in, ok, tc.ok)
		}
	}
}

func TestStrMatchesEncodingJSON(t *testing.T) {
	for _, in := range []string{`"plain"`, `"tab\tand \"quote\""`, "\"bad \xff utf8\"", `"\ud83d\ude00"`} {
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		got, ok := New([]byte(in)).Str()
		if !ok || got != want {
			t.Errorf("Str(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// FuzzRaw checks that Raw accepts exactly the texts encoding/json calls
// valid, and returns them unchanged.
func FuzzRaw(f *testing.F) {
	for _, s := range []string{`{}`, `[1,"a",{"b":null}]`, `"\u0041"`, `1e5`, `{"a":}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := New(data)
		raw, ok := s.Raw()
		ok = ok && s.Done()
		if ok != json.Valid(data) {
			t.Fatalf("Raw ok = %v, json.Valid = %v for %q", ok, json.Valid(data), data)
		}
		if ok && !json.Valid(raw) {
			t.Fatalf("Raw returned invalid JSON %q", raw)
		}
	})
}
