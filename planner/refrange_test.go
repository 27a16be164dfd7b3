package planner

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

const refSrc = `ami = "ami-1"
launch_template {
  name = "burst"
}
block_device {
  device_name = "/dev/xvda"
}
block_device {
  device_name = "/dev/sdf"
  volume_size = -1
}
`

func refBody(t testing.TB) *hclsyntax.Body {
	f, diags := hclsyntax.ParseConfig([]byte(refSrc), "main.pond.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return f.Body.(*hclsyntax.Body)
}

// TestRefRange: a provider's diagnostic names an argument, a nested block
// (the first of its type, or the i-th), or an argument of one, and lands
// at its line and column; a reference to nothing there lands nowhere.
func TestRefRange(t *testing.T) {
	sb := refBody(t)
	for _, tc := range []struct {
		ref       string
		line, col int // 0: no range
	}{
		{"ami", 1, 7},
		{"launch_template", 2, 1},
		{"launch_template.name", 3, 10},
		{"block_device", 5, 1},
		{"block_device[0].device_name", 6, 17},
		{"block_device[1]", 8, 1},
		{"block_device[1].volume_size", 10, 17},
		{"block_device[1].nothing", 8, 1},
		{"block_device[2]", 0, 0},
		{"block_device[-1]", 0, 0},
		{"block_device[x]", 0, 0},
		{"nothing", 0, 0},
		{"", 0, 0},
	} {
		r := refRange(sb, tc.ref)
		switch {
		case tc.line == 0 && r != nil:
			t.Errorf("%q at %s, want nowhere", tc.ref, r)
		case tc.line != 0 && (r == nil || r.Start.Line != tc.line || r.Start.Column != tc.col):
			t.Errorf("%q at %v, want line %d column %d", tc.ref, r, tc.line, tc.col)
		}
	}
}

func FuzzRefRange(f *testing.F) {
	for _, s := range []string{"ami", "block_device[1].volume_size", "a[", "[]", "a[1]].b", "a.b.c[2].d"} {
		f.Add(s)
	}
	sb := refBody(f)
	f.Fuzz(func(t *testing.T, ref string) {
		if r := refRange(sb, ref); r != nil && r.Filename != "main.pond.hcl" {
			t.Errorf("%q: range %s outside the file", ref, r)
		}
	})
}
