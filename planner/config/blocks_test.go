package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestMovedRemovedErrors checks that each wrong moved or removed block is an
// error at the place it is wrong (line and column), saying why.
func TestMovedRemovedErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		summary   string
		line, col int
	}{
		{"quoted address", "pool \"b\" {}\nmoved {\n  from = \"pool.a\"\n  to   = pool.b\n}", "Invalid address", 3, 10},
		{"data source", "pool \"b\" {}\nmoved {\n  from = data.sea_query.a\n  to   = pool.b\n}", "Invalid address", 3, 10},
		{"unknown type", "pool \"b\" {}\nmoved {\n  from = pol.a\n  to   = pool.b\n}", "Invalid address", 3, 10},
		{"attribute after key", "pool \"b\" {}\nmoved {\n  from = pool.a[0].id\n  to   = pool.b\n}", "Invalid address", 3, 10},
		{"missing to", "pool \"b\" {}\nmoved {\n  from = pool.a\n}", "Missing required argument", 2, 7},
		{"label", "pool \"b\" {}\nmoved \"x\" {\n  from = pool.a\n  to   = pool.b\n}", "Extraneous label for moved", 2, 7},
		{"type mismatch", "pond \"b\" {}\nmoved {\n  from = pool.a\n  to   = pond.b\n}", "Resource type mismatch", 4, 10},
		{"redundant", "pool \"a\" {}\nmoved {\n  from = pool.a\n  to   = pool.a\n}", "Redundant move statement", 2, 1},
		{"source still declared", "pool \"a\" {}\npool \"b\" {}\nmoved {\n  from = pool.a\n  to   = pool.b\n}", "Moved object still exists", 4, 10},
		{"source instance still declared", "pool \"a\" {\n  count = 2\n}\npool \"b\" {}\nmoved {\n  from = pool.a[1]\n  to   = pool.b\n}", "Moved object still exists", 6, 10},
		{"ambiguous source", "pool \"b\" {}\npool \"c\" {}\nmoved {\n  from = pool.a\n  to   = pool.b\n}\nmoved {\n  from = pool.a\n  to   = pool.c\n}", "Ambiguous move statements", 7, 1},
		{"ambiguous destination", "pool \"c\" {}\nmoved {\n  from = pool.a\n  to   = pool.c\n}\nmoved {\n  from = pool.b\n  to   = pool.c\n}", "Ambiguous move statements", 6, 1},
		{"cycle", "moved {\n  from = pool.a\n  to   = pool.b\n}\nmoved {\n  from = pool.b\n  to   = pool.c\n}\nmoved {\n  from = pool.c\n  to   = pool.a\n}", "Cyclic dependency in move statements", 1, 1},
		{"removed still declared", "pool \"a\" {}\nremoved {\n  from = pool.a\n}", "Removed resource still exists", 3, 10},
		{"removed instance", "removed {\n  from = pool.a[0]\n}", "Resource instance keys not allowed", 2, 10},
		{"removed destroy not bool", "removed {\n  from = pool.a\n  lifecycle {\n    destroy = \"no\"\n  }\n}", "Incorrect attribute value type", 4, 15},
		{"removed unknown lifecycle argument", "removed {\n  from = pool.a\n  lifecycle {\n    prevent_destroy = true\n  }\n}", "Unsupported argument", 4, 5},
		{"removed twice", "removed {\n  from = pool.a\n}\nremoved {\n  from = pool.a\n}", "Duplicate removed block", 4, 1},
		{"removed move target", "pool \"c\" {}\nmoved {\n  from = pool.a\n  to   = pool.b\n}\nremoved {\n  from = pool.b\n}", "Removed resource is the target of a move", 7, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := LoadFiles("", map[string][]byte{"main.pond.hcl": []byte(tt.src)}, LoadOptions{})
			if !diags.HasErrors() {
				diags = append(diags, cfg.Validate()...)
			}
			if !diags.HasErrors() {
				t.Fatalf("no error, want %q", tt.summary)
			}
			d := diags[0]
			if !strings.HasPrefix(d.Summary, tt.summary) {
				t.Fatalf("error %q (%s), want %q", d.Summary, d.Detail, tt.summary)
			}
			if d.Subject == nil || d.Subject.Filename != "main.pond.hcl" || d.Subject.Start.Line != tt.line || d.Subject.Start.Column != tt.col {
				t.Fatalf("error %q at %v, want main.pond.hcl:%d,%d", d.Summary, d.Subject, tt.line, tt.col)
			}
		})
	}
}

// TestMoveOrder checks that chained moves come in the order that carries
// objects to the end of the chain, whatever order the blocks are written
// in.
func TestMoveOrder(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"chain written backwards", "moved {\n  from = pool.b\n  to = pool.c\n}\nmoved {\n  from = pool.a\n  to = pool.b\n}", "pool.a>pool.b pool.b>pool.c"},
		{"instance out of a moved resource", "moved {\n  from = pool.b[0]\n  to = pool.c[\"x\"]\n}\nmoved {\n  from = pool.a\n  to = pool.b\n}", `pool.a>pool.b pool.b[0]>pool.c["x"]`},
		{"independent keep file order", "moved {\n  from = pool.x\n  to = pool.y\n}\nmoved {\n  from = pool.a\n  to = pool.b\n}", "pool.x>pool.y pool.a>pool.b"},
		{"unkeyed into count", "moved {\n  from = pool.a\n  to = pool.a[0]\n}", "pool.a>pool.a[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := LoadFiles("", map[string][]byte{"main.pond.hcl": []byte(tt.src)}, LoadOptions{})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			order, diags := cfg.MoveOrder()
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			var got []string
			for _, m := range order {
				got = append(got, fmt.Sprintf("%s>%s", m.From, m.To))
			}
			if s := strings.Join(got, " "); s != tt.want {
				t.Fatalf("order %s, want %s", s, tt.want)
			}
		})
	}
}

// TestRemovedDestroyDefault checks that a removed block destroys unless its
// lifecycle says destroy = false, and that JSON syntax reads the same.
func TestRemovedDestroyDefault(t *testing.T) {
	for _, tt := range []struct {
		file, src string
		destroy   bool
	}{
		{"main.pond.hcl", "removed {\n  from = pool.a\n}", true},
		{"main.pond.hcl", "removed {\n  from = pool.a\n  lifecycle {\n    destroy = false\n  }\n}", false},
		{"main.pond.hcl", "removed {\n  from = pool.a\n  lifecycle {\n    destroy = true\n  }\n}", true},
		{"main.pond.json", `{"removed": [{"from": "pool.a", "lifecycle": {"destroy": false}}], "moved": [{"from": "pool.x", "to": "pool.y"}]}`, false},
	} {
		cfg, diags := LoadFiles("", map[string][]byte{tt.file: []byte(tt.src)}, LoadOptions{})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", tt.src, diags)
		}
		if len(cfg.Removed) != 1 || cfg.Removed[0].From.String() != "pool.a" || cfg.Removed[0].Destroy != tt.destroy {
			t.Fatalf("%s: removed %+v, want pool.a destroy=%v", tt.src, cfg.Removed, tt.destroy)
		}
	}
}

// refactorSeeds seed FuzzLoad with moved and removed blocks.
var refactorSeeds = []string{
	"pool \"c\" {\n  count = 2\n}\nmoved {\n  from = pool.a\n  to   = pool.b\n}\nmoved {\n  from = pool.b\n  to   = pool.c\n}\n",
	"pool \"w\" {\n  for_each = toset([\"x\"])\n}\nmoved {\n  from = pool.w[0]\n  to   = pool.w[\"x\"]\n}\nremoved {\n  from = pool.old\n  lifecycle {\n    destroy = false\n  }\n}\n",
}
