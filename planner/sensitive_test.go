package planner_test

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// sensitiveConfig uses a sensitive variable, and the sensitive function,
// in a pool's labels.
func sensitiveConfig(secret string) string {
	return `
variable "token" {
  type      = string
  default   = "` + secret + `"
  sensitive = true
}

pool "p" {
  nodes  = 1
  labels = { token = var.token, other = sensitive("fn-0a1b2c"), plain = "x", upper = upper(var.token) }
}

output "plain" {
  value = pool.p.labels["plain"]
}

output "token" {
  value     = pool.p.labels["token"]
  sensitive = true
}
`
}

// TestSensitiveValuesInState checks that values derived from sensitive
// ones reach the provider but never the state, which holds null and a
// keyed hash instead; that a plan with the same secret changes nothing;
// that a plan with another secret updates the instance and marks the
// secret's paths; and that the plan's values are marked where they are
// sensitive.
func TestSensitiveValuesInState(t *testing.T) {
	h := newHarness(t)
	const secret = "s3cr3t-5f7e21"
	h.write(sensitiveConfig(secret))
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	checkNoSecret := func(secrets ...string) *state.Instance {
		t.Helper()
		data, err := state.Encode(h.state)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if strings.Contains(strings.ToLower(string(data)), strings.ToLower(s)) {
				t.Fatalf("state holds %q:\n%s", s, data)
			}
		}
		inst := h.state.Resources[0].Instances[0]
		for _, p := range []string{`labels["token"]`, `labels["other"]`, `labels["upper"]`} {
			if !strings.HasPrefix(inst.SensitiveValues[p], providers.HashPrefix) {
				t.Fatalf("sensitive_values[%s] = %q; all: %v", p, inst.SensitiveValues[p], inst.SensitiveValues)
			}
		}
		if _, ok := inst.SensitiveValues[`labels["plain"]`]; ok {
			t.Fatalf("plain label hashed: %v", inst.SensitiveValues)
		}
		if !strings.Contains(string(inst.Attributes), `"plain":"x"`) {
			t.Fatalf("plain label not stored: %s", inst.Attributes)
		}
		return inst
	}
	first := checkNoSecret(secret, "fn-0a1b2c")
	if o := h.state.Outputs["token"]; o == nil || !o.Sensitive {
		t.Fatalf("output token = %+v, want sensitive", o)
	}

	// The same secrets: nothing to do.
	p, err := h.plan(refresh())
	if err != nil {
		t.Fatal(err)
	}
	if a := actions(p); len(a) != 0 {
		t.Fatalf("plan with the same secret: %v, want no changes", a)
	}
	for _, c := range p.Changes {
		before, after := c.Marked()
		for _, v := range []cty.Value{before, after} {
			tok := v.GetAttr("labels").Index(cty.StringVal("token"))
			if !tok.IsMarked() || v.GetAttr("labels").Index(cty.StringVal("plain")).IsMarked() {
				t.Fatalf("marks of %#v", v)
			}
		}
	}

	// Another secret: an update, and the state's hash changes.
	h.write(sensitiveConfig("an0ther-9c8d"))
	p, err = h.plan(refresh())
	if err != nil {
		t.Fatal(err)
	}
	if a := actions(p); a["pool.p"] != "update" {
		t.Fatalf("plan with another secret: %v, want pool.p updated", a)
	}
	var paths []string
	for _, sp := range p.Changes[0].SensitivePaths {
		paths = append(paths, providers.FormatPath(sp))
	}
	if got := strings.Join(paths, " "); got != `labels["other"] labels["token"] labels["upper"]` {
		t.Fatalf("sensitive paths %s", got)
	}
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	second := checkNoSecret(secret, "an0ther-9c8d", "fn-0a1b2c")
	if first.SensitiveValues[`labels["token"]`] == second.SensitiveValues[`labels["token"]`] {
		t.Fatal("the hash of the secret did not change with it")
	}
	if first.SensitiveValues[`labels["other"]`] != second.SensitiveValues[`labels["other"]`] {
		t.Fatal("the hash of an unchanged secret changed")
	}
	if a, _, err := h.apply(refresh()); err != nil || len(a) != 0 {
		t.Fatalf("apply again: %v, %v; want nothing to do", a, err)
	}
}

// TestSensitiveValuesRefused checks what a sensitive value may not be: an
// instance key, or the value of an output not declared sensitive.
func TestSensitiveValuesRefused(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"output", `
variable "token" {
  default   = "x"
  sensitive = true
}
output "leak" {
  value = "token: ${var.token}"
}
`, `Output refers to sensitive values`},
		{"for_each", `
variable "names" {
  default   = ["a", "b"]
  sensitive = true
}
pool "w" {
  for_each = toset(var.names)
  nodes    = 1
}
`, "the for_each value is sensitive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.write(tc.src)
			_, err := h.plan(refresh())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("plan: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestMarkStored checks that the values a state instance hashes are
// marked when it is read back, and only those.
func TestMarkStored(t *testing.T) {
	v := cty.ObjectVal(map[string]cty.Value{
		"labels": cty.MapVal(map[string]cty.Value{"a": cty.NullVal(cty.String), "b": cty.StringVal("x")}),
	})
	m := planner.MarkStored(v, map[string]string{`labels["a"]`: providers.HashPrefix + "00"})
	if !m.GetAttr("labels").Index(cty.StringVal("a")).IsMarked() || m.GetAttr("labels").Index(cty.StringVal("b")).IsMarked() {
		t.Fatalf("marks: %#v", m)
	}
}
