package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

func TestNew(t *testing.T) {
	a, b := New(), New()
	if a.Serial != 0 || a.FormatVersion != FormatVersion {
		t.Fatalf("New() = serial %d format %d, want 0 and %d", a.Serial, a.FormatVersion, FormatVersion)
	}
	if _, err := uuid.Parse(a.Lineage); err != nil {
		t.Fatalf("lineage %q is not a uuid: %v", a.Lineage, err)
	}
	if a.Lineage == b.Lineage {
		t.Fatalf("two New() states share lineage %s", a.Lineage)
	}
	data, err := Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data, "new")
	if err != nil {
		t.Fatalf("Decode(Encode(New())): %v", err)
	}
	if diff := cmp.Diff(a, back); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
}

const validDoc = `{
  "format_version": 1,
  "serial": 3,
  "lineage": "5c3a3f0e-2f6b-4b8e-9b1e-3a1f0f4c2d11",
  "outputs": {},
  "resources": [
    {
      "mode": "managed",
      "type": "pool",
      "name": "w",
      "provider": "provider.local",
      "instances": [
        {
          "index_key": 0,
          "schema_version": 0,
          "attributes": {"id": "w0"}
        }
      ]
    }
  ]
}
`

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name      string
		doc       string
		want      []string // substrings of the error
		line, col int
		newer     bool
	}{
		{"empty", "", []string{"x.state: state document is empty"}, 0, 0, false},
		{"blank", " \n\t", []string{"empty"}, 0, 0, false},
		{"truncated", validDoc[:200], []string{"truncated state document"}, 11, 2, false},
		{"truncated at brace", "{", []string{"truncated"}, 1, 2, false},
		{"corrupt", "{\n  \"format_version\": 1,\n  \"serial\": 3 x\n}", []string{"corrupt state document", "invalid character 'x'"}, 3, 15, false},
		{"dependencies not a list", `{"format_version":1,"serial":1,"lineage":"l","resources":[{"mode":"managed","type":"pool","name":"a","provider":"p","instances":[{"attributes":{},"dependencies":"x"}]}]}`, []string{"resources.instances.dependencies: cannot use a JSON string here, want an array"}, 1, 162, false},
		{"not an object", `[1,2]`, []string{"cannot use a JSON array here"}, 1, 1, false},
		{"serial is a string", `{"format_version": 1, "serial": "3", "lineage": "l"}`, []string{"serial: cannot use a JSON string here, want a whole number"}, 1, 33, false},
		{"missing format_version", `{"serial": 1, "lineage": "l"}`, []string{`missing "format_version"`}, 1, 1, false},
		{"missing serial", `{"format_version": 1, "lineage": "l"}`, []string{`missing "serial"`}, 1, 1, false},
		{"missing lineage", `{"format_version": 1, "serial": 1}`, []string{`missing "lineage"`}, 1, 1, false},
		{"zero format", `{"format_version": 0, "serial": 1, "lineage": "l"}`, []string{"format_version: invalid format_version 0"}, 1, 20, false},
		{"newer", `{"format_version": 2, "serial": 1, "lineage": "l"}`, []string{"state was written by a newer pond (format 2); this pond reads format 1"}, 1, 20, true},
		{"newer pond", `{"format_version": 1, "pond_version": "0.2.0", "serial": 1, "lineage": "l"}`, []string{"x.state:1:39: pond_version: state was written by pondctl 0.2.0, newer than this pondctl, which writes pond_version " + PondVersion}, 1, 39, false},
		{"newer with another shape", `{"format_version": 7, "serial": {"a": 1}, "resources": 3}`, []string{"newer pond (format 7)"}, 1, 20, true},
		{"missing resource type", strings.Replace(validDoc, `"type": "pool",`, "", 1), []string{`resources[0]: missing "type"`}, 7, 5, false},
		{"missing instances", `{"format_version":1,"serial":1,"lineage":"l","resources":[{"mode":"managed","type":"pool","name":"a","provider":"p"}]}`, []string{`resources[0]: missing "instances"`}, 1, 59, false},
		{"missing attributes", strings.Replace(validDoc, `"attributes": {"id": "w0"}`, `"status": ""`, 1), []string{`resources[0].instances[0]: missing "attributes"`}, 13, 9, false},
		{"bad mode", strings.Replace(validDoc, `"managed"`, `"weird"`, 1), []string{`resources[0].mode: mode is "weird"`}, 8, 15, false},
		{"bad name", strings.Replace(validDoc, `"name": "w"`, `"name": "w x"`, 1), []string{`invalid resource name "w x"`}, 10, 15, false},
		{"bad key", strings.Replace(validDoc, `"index_key": 0`, `"index_key": 1.5`, 1), []string{"index_key: instance key 1.5", "neither a whole non-negative number nor a string"}, 14, 24, false},
		{"negative key", strings.Replace(validDoc, `"index_key": 0`, `"index_key": -1`, 1), []string{"index_key: instance key -1"}, 0, 0, false},
		{"bad status", strings.Replace(validDoc, `"schema_version": 0,`, `"schema_version": 0, "status": "odd",`, 1), []string{`status is "odd"`}, 0, 0, false},
		{"duplicate resource", `{"format_version":1,"serial":1,"lineage":"l","resources":[
{"mode":"managed","type":"pool","name":"a","provider":"p","instances":[]},
{"mode":"managed","type":"pool","name":"a","provider":"p","instances":[]}]}`, []string{"resources[1]: duplicate resource pool.a"}, 3, 1, false},
		{"duplicate instance", `{"format_version":1,"serial":1,"lineage":"l","resources":[
{"mode":"managed","type":"pool","name":"a","provider":"p","instances":[{"index_key":"x","attributes":{}},{"index_key":"x","attributes":{}}]}]}`, []string{`duplicate instance pool.a["x"]`}, 2, 106, false},
		{"mixed keys", `{"format_version":1,"serial":1,"lineage":"l","resources":[
{"mode":"managed","type":"pool","name":"a","provider":"p","instances":[{"index_key":1,"attributes":{}},{"attributes":{}}]}]}`, []string{"cannot have both count and unkeyed instances"}, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Decode([]byte(tt.doc), "x.state")
			if err == nil {
				t.Fatalf("Decode succeeded: %+v", s)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DecodeError", err)
			}
			if tt.line != 0 && (de.Line != tt.line || de.Column != tt.col) {
				t.Errorf("error at %d:%d, want %d:%d (%v)", de.Line, de.Column, tt.line, tt.col, err)
			}
			if got := errors.Is(err, ErrNewerFormat); got != tt.newer {
				t.Errorf("errors.Is(err, ErrNewerFormat) = %v, want %v", got, tt.newer)
			}
			if got, want := errors.Is(err, ErrNewerPond), tt.name == "newer pond"; got != want {
				t.Errorf("errors.Is(err, ErrNewerPond) = %v, want %v", got, want)
			}
		})
	}
}

func TestDecodePondVersion(t *testing.T) {
	for _, v := range []string{"", PondVersion, "0.0.9", "v0.1.0", "0.1.0-dev", "0.1.0+abc", "test", "1.0"} {
		doc := `{"format_version": 1, "pond_version": "` + v + `", "serial": 1, "lineage": "l"}`
		if _, err := Decode([]byte(doc), "x.state"); err != nil {
			t.Errorf("pond_version %q: %v", v, err)
		}
	}
	for _, v := range []string{"0.1.1", "0.2.0-dev", "1.0.0", "v10.0.0", "0.1.1+abc"} {
		doc := `{"format_version": 1, "pond_version": "` + v + `", "serial": 1, "lineage": "l"}`
		if _, err := Decode([]byte(doc), "x.state"); !errors.Is(err, ErrNewerPond) {
			t.Errorf("pond_version %q: error %v, want one wrapping ErrNewerPond", v, err)
		}
	}
}

func TestNewerRelease(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"0.2.0", "0.1.0", true},
		{"0.1.0", "0.2.0", false},
		{"0.1.0", "0.1.0", false},
		{"0.10.0", "0.9.0", true},
		{"1.0.0", "0.99.99", true},
		{"0.1.0", "0.1.0-dev", true},
		{"0.1.0-dev", "0.1.0", false},
		{"0.1.0-rc.10", "0.1.0-rc.9", true},
		{"0.1.0-rc.1", "0.1.0-rc", true},
		{"0.1.0-beta", "0.1.0-alpha", true},
		{"0.1.0-1", "0.1.0-alpha", false},
		{"0.1.0+b2", "0.1.0+b1", false},
		{"garbage", "0.1.0", false},
		{"0.2.0", "garbage", false},
		{"0.2", "0.1.0", false},
	}
	for _, tt := range tests {
		if got := newerRelease(tt.a, tt.b); got != tt.want {
			t.Errorf("newerRelease(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestDecodeNormalizes(t *testing.T) {
	s, err := Decode([]byte(validDoc), "v")
	if err != nil {
		t.Fatal(err)
	}
	inst := s.Resources[0].Instances[0]
	if inst.IndexKey != 0 {
		t.Errorf("IndexKey = %#v, want int 0", inst.IndexKey)
	}
	if string(inst.Attributes) != `{"id":"w0"}` {
		t.Errorf("Attributes = %s, want compacted", inst.Attributes)
	}
}

func sample() *State {
	s := New()
	s.Lineage = "00000000-0000-4000-8000-000000000000"
	s.Serial = 4
	s.Outputs["members"] = &Output{Value: json.RawMessage(`["a","b"]`), Type: json.RawMessage(`["list","string"]`)}
	s.Resources = []*Resource{
		{Mode: ModeManaged, Type: "pool", Name: "w", Provider: "provider.local", Instances: []*Instance{
			{IndexKey: 10, Attributes: json.RawMessage(`{"id":"w10"}`)},
			{IndexKey: 2, Attributes: json.RawMessage(`{"id":"w2"}`), Dependencies: []string{"pool.campus", "data.sea_query.big"}},
		}},
		{Mode: ModeData, Type: "sea_query", Name: "big", Provider: "provider.sea", Instances: []*Instance{
			{Attributes: json.RawMessage(`{"requirements":"Memory >= 1024 && Cpus > 1"}`)},
		}},
		{Mode: ModeManaged, Type: "pool", Name: "campus", Provider: "provider.local", Instances: []*Instance{
			{Attributes: json.RawMessage(`{"id":"c"}`), SensitiveAttributes: []string{"token"}, Status: "tainted"},
		}},
		{Mode: ModeManaged, Type: "pond", Name: "burst", Provider: "provider.local", Instances: []*Instance{
			{IndexKey: "b", Attributes: json.RawMessage(`{}`)},
			{IndexKey: "a", Attributes: json.RawMessage(`{}`), CreateBeforeDestroy: true},
		}},
	}
	return s
}

const sampleEncoded = `{
  "format_version": 1,
  "serial": 4,
  "lineage": "00000000-0000-4000-8000-000000000000",
  "outputs": {
    "members": {
      "value": [
        "a",
        "b"
      ],
      "type": [
        "list",
        "string"
      ]
    }
  },
  "resources": [
    {
      "mode": "data",
      "type": "sea_query",
      "name": "big",
      "provider": "provider.sea",
      "instances": [
        {
          "schema_version": 0,
          "attributes": {
            "requirements": "Memory >= 1024 && Cpus > 1"
          }
        }
      ]
    },
    {
      "mode": "managed",
      "type": "pond",
      "name": "burst",
      "provider": "provider.local",
      "instances": [
        {
          "index_key": "a",
          "schema_version": 0,
          "attributes": {},
          "create_before_destroy": true
        },
        {
          "index_key": "b",
          "schema_version": 0,
          "attributes": {}
        }
      ]
    },
    {
      "mode": "managed",
      "type": "pool",
      "name": "campus",
      "provider": "provider.local",
      "instances": [
        {
          "schema_version": 0,
          "attributes": {
            "id": "c"
          },
          "sensitive_attributes": [
            "token"
          ],
          "status": "tainted"
        }
      ]
    },
    {
      "mode": "managed",
      "type": "pool",
      "name": "w",
      "provider": "provider.local",
      "instances": [
        {
          "index_key": 2,
          "schema_version": 0,
          "attributes": {
            "id": "w2"
          },
          "dependencies": [
            "data.sea_query.big",
            "pool.campus"
          ]
        },
        {
          "index_key": 10,
          "schema_version": 0,
          "attributes": {
            "id": "w10"
          }
        }
      ]
    }
  ]
}
`

func TestEncodeCanonical(t *testing.T) {
	s := sample()
	before := s.DeepCopy()
	got, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sampleEncoded, string(got)); diff != "" {
		t.Fatalf("Encode (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, s); diff != "" {
		t.Fatalf("Encode modified its argument (-before +after):\n%s", diff)
	}
	back, err := Decode(got, "sample")
	if err != nil {
		t.Fatal(err)
	}
	if !ContentEqual(s, back) {
		t.Fatal("decoded state differs from the encoded one")
	}
	again, err := Encode(back)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(got) {
		t.Fatalf("Encode(Decode(x)) != x:\n%s", again)
	}
}

func TestEncodeErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*State)
		want   string
	}{
		{"no lineage", func(s *State) { s.Lineage = "" }, "no lineage"},
		{"bad key", func(s *State) { s.Resources[0].Instances[0].IndexKey = 1.5 }, "instance key 1.5"},
		{"duplicate resource", func(s *State) { s.Resources = append(s.Resources, s.Resources[0].DeepCopy()) }, "duplicate resource pool.w"},
		{"duplicate instance", func(s *State) { s.Resources[0].Instances[1].IndexKey = int64(10) }, "duplicate instance pool.w[10]"},
		{"bad mode", func(s *State) { s.Resources[0].Mode = "" }, `mode is ""`},
		{"nil instance", func(s *State) { s.Resources[0].Instances[0] = nil }, "nil instance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sample()
			tt.mutate(s)
			_, err := Encode(s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Encode error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestDeepCopy(t *testing.T) {
	s := sample()
	c := s.DeepCopy()
	if diff := cmp.Diff(s, c); diff != "" {
		t.Fatalf("copy differs (-orig +copy):\n%s", diff)
	}
	c.Resources[0].Instances[1].Attributes[2] = 'X'
	c.Resources[0].Instances[1].Dependencies[0] = "changed"
	c.Outputs["members"].Value[1] = 'X'
	c.Resources[1].Name = "other"
	if diff := cmp.Diff(sample(), s); diff != "" {
		t.Fatalf("changing the copy changed the original (-want +got):\n%s", diff)
	}
}

func TestContentEqual(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*State)
		equal  bool
	}{
		{"identical", func(*State) {}, true},
		{"serial and lineage ignored", func(s *State) { s.Serial = 99; s.Lineage = "other"; s.PondVersion = "9" }, true},
		{"order ignored", func(s *State) {
			s.Resources[0], s.Resources[1] = s.Resources[1], s.Resources[0]
			r := s.Resources[1]
			r.Instances[0], r.Instances[1] = r.Instances[1], r.Instances[0]
		}, true},
		{"whitespace ignored", func(s *State) { s.Resources[0].Instances[0].Attributes = json.RawMessage(`{ "id" : "w10" }`) }, true},
		{"dependency order ignored", func(s *State) {
			d := s.Resources[0].Instances[1].Dependencies
			d[0], d[1] = d[1], d[0]
		}, true},
		{"attribute changed", func(s *State) { s.Resources[0].Instances[0].Attributes = json.RawMessage(`{"id":"w11"}`) }, false},
		{"instance removed", func(s *State) { s.Resources[0].Instances = s.Resources[0].Instances[:1] }, false},
		{"resource removed", func(s *State) { s.Resources = s.Resources[1:] }, false},
		{"provider changed", func(s *State) { s.Resources[0].Provider = "provider.aws" }, false},
		{"tainted", func(s *State) { s.Resources[0].Instances[0].Status = "tainted" }, false},
		{"output changed", func(s *State) { s.Outputs["members"].Sensitive = true }, false},
		{"output added", func(s *State) { s.Outputs["x"] = &Output{Value: json.RawMessage(`1`)} }, false},
		{"dependency added", func(s *State) { s.Resources[0].Instances[0].Dependencies = []string{"pool.campus"} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sample()
			tt.mutate(s)
			if got := ContentEqual(sample(), s); got != tt.equal {
				t.Fatalf("ContentEqual = %v, want %v", got, tt.equal)
			}
			if got := ContentEqual(s, sample()); got != tt.equal {
				t.Fatalf("ContentEqual (swapped) = %v, want %v", got, tt.equal)
			}
		})
	}
}

func TestPrepareWrite(t *testing.T) {
	changed := func(s *State) *State { s.Outputs["x"] = &Output{Value: json.RawMessage(`1`)}; return s }
	withSerial := func(s *State, n uint64) *State { s.Serial = n; return s }
	tests := []struct {
		name       string
		stored     *State
		next       *State
		write      bool
		wantSerial uint64
	}{
		{"first write", nil, withSerial(sample(), 0), true, 1},
		{"first write keeps a higher serial", nil, sample(), true, 4},
		{"unchanged", sample(), sample(), false, 4},
		{"unchanged with a stale serial", sample(), withSerial(sample(), 1), false, 4},
		{"changed", sample(), changed(sample()), true, 5},
		{"changed from a stale serial", sample(), changed(withSerial(sample(), 2)), true, 5},
		{"changed with a higher serial", sample(), changed(withSerial(sample(), 9)), true, 9},
		{"same content with a higher serial", sample(), withSerial(sample(), 9), true, 9},
		{"other lineage is written as is", sample(), func() *State { s := sample(); s.Lineage = "x"; s.Serial = 1; return s }(), true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PrepareWrite(tt.stored, tt.next); got != tt.write {
				t.Errorf("PrepareWrite = %v, want %v", got, tt.write)
			}
			if tt.next.Serial != tt.wantSerial {
				t.Errorf("serial = %d, want %d", tt.next.Serial, tt.wantSerial)
			}
		})
	}
}

func TestCheckPush(t *testing.T) {
	other := sample()
	other.Lineage = "11111111-0000-4000-8000-000000000000"
	lower := sample()
	lower.Serial = 2
	higher := sample()
	higher.Serial = 7
	newer := sample()
	newer.FormatVersion = 2
	newerPond := sample()
	newerPond.PondVersion = "9.0.0"
	tests := []struct {
		name     string
		current  *State
		incoming *State
		force    bool
		want     string // "" for success
	}{
		{"nothing stored", nil, sample(), false, ""},
		{"same serial", sample(), sample(), false, ""},
		{"higher serial", sample(), higher, false, ""},
		{"lower serial", sample(), lower, false, "serial 2, older than the stored state's serial 4; use -force"},
		{"lower serial forced", sample(), lower, true, ""},
		{"other lineage", sample(), other, false, "lineage 11111111-0000-4000-8000-000000000000 but the stored state has lineage 00000000-0000-4000-8000-000000000000"},
		{"other lineage forced", sample(), other, true, ""},
		{"newer format", sample(), newer, true, "newer pond (format 2)"},
		{"newer pond", sample(), newerPond, true, "written by pondctl 9.0.0, newer than this pondctl"},
		{"nil", sample(), nil, false, "no state given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckPush(tt.current, tt.incoming, tt.force)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckPush: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckPush error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// stdEncode is the reference encoding: encoding/json, indented, without
// HTML escaping, of the canonical form.
func stdEncode(t testing.TB, s *State) []byte {
	t.Helper()
	c, err := canonical(s)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	odd := sample()
	odd.PondVersion = "1.0 <beta> & \"quoted\""
	odd.Resources[0].Instances[0].IndexKey = "tab\there\u2028 é \x01 <&>"
	odd.Resources[0].Instances[1].Attributes = json.RawMessage(" {\"a\" : [ 1, {}, [], {\"b\": null} ], \"s\": \"\\u003c\" } \n")
	odd.Resources[0].Instances[1].SensitiveAttributes = []string{"z", "a"}
	odd.Outputs["empty"] = &Output{Value: json.RawMessage(`[]`)}
	for name, s := range map[string]*State{"sample": sample(), "new": New(), "odd": odd, "big": bigState(50)} {
		t.Run(name, func(t *testing.T) {
			got, err := Encode(s)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(stdEncode(t, s)), string(got)); diff != "" {
				t.Fatalf("Encode differs from encoding/json (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeInvalidRaw(t *testing.T) {
	s := sample()
	s.Resources[0].Instances[0].Attributes = json.RawMessage(`{"a":`)
	_, err := Encode(s)
	if err == nil || !strings.Contains(err.Error(), "pool.w[10] attributes: invalid JSON") {
		t.Fatalf("Encode error = %v", err)
	}
}

func TestCompactRaw(t *testing.T) {
	for _, in := range []string{
		`{}`, ` { "a" : 1 } `, "[\n  1,\n  \"x y\\\" z\\\\\",\n  {\"k\\n\": [ ]}\n]", `"  spaced string "`, `null`,
		"{\"a\":\"\\\\\", \"b\" :\t2}", `{"u":"\u00e9 \u003c"}`,
	} {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatal(err)
		}
		if got := compactRaw(json.RawMessage(in)); string(got) != want.String() {
			t.Errorf("compactRaw(%q) = %q, want %q", in, got, want.String())
		}
	}
}

// TestSensitiveValuesRoundTrip checks that an instance's sensitive value
// hashes and an output's hash survive Encode and Decode, DeepCopy does
// not share them, and ContentEqual sees them change.
func TestSensitiveValuesRoundTrip(t *testing.T) {
	s := New()
	s.Outputs["token"] = &Output{Value: json.RawMessage(`null`), Type: json.RawMessage(`"string"`), Sensitive: true, Hash: "hmac-sha256:01"}
	s.Resources = []*Resource{{Mode: ModeManaged, Type: "pool", Name: "p", Provider: "provider.local", Instances: []*Instance{{
		Attributes:      json.RawMessage(`{"config":{"A":"x","SECRET":null}}`),
		SensitiveValues: map[string]string{`config["SECRET"]`: "hmac-sha256:02", `config["Z"]`: "hmac-sha256:03"},
	}}}}
	data, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data, "test")
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if !ContentEqual(s, back) {
		t.Fatalf("round trip changed the state:\n%s", data)
	}
	if got := back.Resources[0].Instances[0].SensitiveValues[`config["SECRET"]`]; got != "hmac-sha256:02" {
		t.Fatalf("sensitive value hash %q after a round trip:\n%s", got, data)
	}
	if got := back.Outputs["token"].Hash; got != "hmac-sha256:01" {
		t.Fatalf("output hash %q after a round trip:\n%s", got, data)
	}
	c := back.DeepCopy()
	c.Resources[0].Instances[0].SensitiveValues[`config["SECRET"]`] = "hmac-sha256:04"
	if back.Resources[0].Instances[0].SensitiveValues[`config["SECRET"]`] != "hmac-sha256:02" {
		t.Fatal("DeepCopy shares the hashes")
	}
	if ContentEqual(c, back) {
		t.Fatal("ContentEqual does not see a changed hash")
	}
	c = back.DeepCopy()
	c.Outputs["token"].Hash = "hmac-sha256:05"
	if ContentEqual(c, back) {
		t.Fatal("ContentEqual does not see a changed output hash")
	}
}
