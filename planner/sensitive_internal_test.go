package planner

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner/marks"
	"github.com/pond-htc/pond/providers"
)

// TestRedactRestore checks the paths found for sensitive values (a map
// element, a whole object, a set, which has no path into it), that
// redact leaves none of them in the value it stores, and that restore
// brings back exactly those whose hash matches.
func TestRedactRestore(t *testing.T) {
	key := func() ([]byte, error) { return []byte("k"), nil }
	s := func(x string) cty.Value { return cty.StringVal(x).Mark(marks.Sensitive) }
	for _, tc := range []struct {
		name  string
		v     cty.Value
		paths string
	}{
		{"map element", cty.ObjectVal(map[string]cty.Value{
			"config": cty.MapVal(map[string]cty.Value{"A": cty.StringVal("a"), "S": s("s3cret-1")}),
		}), `config["S"]`},
		{"whole object", cty.ObjectVal(map[string]cty.Value{
			"x": cty.StringVal("s3cret-2"), "y": cty.StringVal("s3cret-3"),
		}).Mark(marks.Sensitive), "x y"},
		{"set element", cty.ObjectVal(map[string]cty.Value{
			"names": cty.SetVal([]cty.Value{cty.StringVal("a"), s("s3cret-4")}),
		}), "names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uv, paths := unmarkSensitive(tc.v)
			var got []string
			for _, p := range paths {
				got = append(got, providers.FormatPath(p))
			}
			if strings.Join(got, " ") != tc.paths {
				t.Fatalf("paths %q, want %q", got, tc.paths)
			}
			stored, hashes, err := redact(uv, paths, nil, key)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(stored.GoString(), "s3cret") || len(hashes) != len(paths) {
				t.Fatalf("stored %#v, hashes %v", stored, hashes)
			}
			back, err := restore(stored, hashes, uv, key)
			if err != nil {
				t.Fatal(err)
			}
			if !back.RawEquals(uv) {
				t.Fatalf("restored %#v, want %#v", back, uv)
			}
			// Another value at the same paths is not restored.
			other, err := cty.Transform(uv, func(p cty.Path, x cty.Value) (cty.Value, error) {
				if x.Type() == cty.String && strings.HasPrefix(x.AsString(), "s3cret") {
					return cty.StringVal("changed"), nil
				}
				return x, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if back, _ := restore(stored, hashes, other, key); !back.RawEquals(stored) {
				t.Fatalf("restored %#v from another value", back)
			}
		})
	}
}
