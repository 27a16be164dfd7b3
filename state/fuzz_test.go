package state

import (
	"bytes"
	"testing"
)

// FuzzDecode checks that Decode never panics, and that whatever it accepts
// encodes, decodes back to the same content, and encodes canonically.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(validDoc))
	f.Add([]byte(sampleEncoded))
	f.Add([]byte(`{"format_version":2,"serial":1,"lineage":"l"}`))
	f.Add([]byte(`{"format_version":1,"serial":1,"lineage":"l","resources":[{"mode":"data","type":"t","name":"n","provider":"p","instances":[{"index_key":"k","attributes":null}]}]}`))
	f.Add([]byte(`{"format_version":1,"serial":2,"lineage":"l","outputs":{},"resources":[],"history":[{"serial":2,"time":"2025-01-01T02:00:00+01:00","command":"state mv","user":"u","host":"h","pond_version":"0.1.0","summary":{"add":0,"change":1,"remove":0},"changes":[{"address":"pool.b[\"x\"]","action":"moved","from":"pool.a","attributes":["nodes"]}],"omitted":3}]}`))
	f.Add([]byte(`{"format_version":1,"serial":1,"lineage":"l","outputs":{},"resources":[],"check_results":[{"object_kind":"check","config_addr":"check.a","status":"fail","objects":[{"object_addr":"check.a","status":"fail","failure_messages":["m"]}]},{"object_kind":"check","config_addr":"check.b","status":"unknown","objects":null}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data, "fuzz")
		if err != nil {
			if s != nil {
				t.Fatal("Decode returned both a state and an error")
			}
			return
		}
		enc, err := Encode(s)
		if err != nil {
			t.Fatalf("Encode of a decoded state: %v", err)
		}
		if want := stdEncode(t, s); !bytes.Equal(enc, want) {
			t.Fatalf("Encode differs from encoding/json:\n%s\n---\n%s", enc, want)
		}
		back, err := Decode(enc, "encoded")
		if err != nil {
			t.Fatalf("Decode(Encode(s)): %v\n%s", err, enc)
		}
		if !ContentEqual(s, back) || s.Serial != back.Serial || s.Lineage != back.Lineage {
			t.Fatalf("round trip changed the state:\n%s", enc)
		}
		again, err := Encode(back)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, again) {
			t.Fatalf("encoding is not canonical:\n%s\n---\n%s", enc, again)
		}
		for _, a := range s.Addresses() {
			if s.Instance(a) == nil {
				t.Fatalf("Addresses lists %s but Instance does not find it", a)
			}
		}
	})
}

// FuzzParseAddress checks that ParseAddress never panics and that what it
// accepts prints back to an address that parses to the same value.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"pool.campus", "pool.w[0]", `pool.w["a"]`, "data.sea_query.big", `pool.w["$${x}\n"]`, "module.m.pool.w", "pool.w[0].id", "pool.w[-1]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		a, err := ParseAddress(in)
		if err != nil {
			return
		}
		if a.Type == "" || a.Name == "" {
			t.Fatalf("ParseAddress(%q) = %#v without type or name", in, a)
		}
		out := a.String()
		b, err := ParseAddress(out)
		if err != nil {
			t.Fatalf("ParseAddress(%q) = %#v, whose String %q does not parse: %v", in, a, out, err)
		}
		if a != b {
			t.Fatalf("round trip: %q -> %#v -> %q -> %#v", in, a, out, b)
		}
	})
}
