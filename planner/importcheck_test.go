package planner_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/state"
)

// imports returns the plan's imports as "addr=id", sorted.
func imports(p *planner.Plan) []string {
	var out []string
	for _, c := range p.Changes {
		if c.Importing != nil {
			out = append(out, c.Addr.String()+"="+c.Importing.ID)
		}
	}
	sort.Strings(out)
	return out
}

// diagsOf returns the diagnostics of an error the harness returned.
func diagsOf(err error) hcl.Diagnostics {
	var d hcl.Diagnostics
	errors.As(err, &d)
	return d
}

// TestImportBlocks makes objects in one state, then imports them into a
// fresh one with import blocks: the plan lists the imports, the apply
// stores the same objects (made once, by the first state), and the next
// plan imports nothing and changes nothing.
func TestImportBlocks(t *testing.T) {
	tests := []struct {
		name string
		// made are the configurations whose objects are imported; their
		// ids are given to the import blocks as var.ids.
		made   string
		config string
		// imports are "new=made": the instance new imports the object
		// of the instance made.
		imports []string
		actions map[string]string
	}{
		{
			name:    "single",
			made:    `pool "a" { nodes = 2 }`,
			config:  "pool \"x\" { nodes = 2 }\nimport {\n  to = pool.x\n  id = var.ids[\"pool.a\"]\n}",
			imports: []string{"pool.x=pool.a"},
			actions: map[string]string{},
		},
		{
			name:    "import then update",
			made:    `pool "a" { nodes = 2 }`,
			config:  "pool \"x\" { nodes = 3 }\nimport {\n  to = pool.x\n  id = var.ids[\"pool.a\"]\n}",
			imports: []string{"pool.x=pool.a"},
			actions: map[string]string{"pool.x": "update"},
		},
		{
			name:    "count instance",
			made:    `pool "a" { nodes = 1 }`,
			config:  "pool \"x\" {\n  count = 2\n  nodes = 1\n}\nimport {\n  to = pool.x[1]\n  id = var.ids[\"pool.a\"]\n}",
			imports: []string{"pool.x[1]=pool.a"},
			actions: map[string]string{"pool.x[0]": "create"},
		},
		{
			name: "for_each",
			made: "pool \"a\" {\n  for_each = toset([\"p\", \"q\"])\n  nodes = 1\n}",
			config: `
pool "x" {
  for_each = toset(["p", "q"])
  nodes    = 1
}
import {
  for_each = { p = var.ids["pool.a[\"p\"]"], q = var.ids["pool.a[\"q\"]"] }
  to       = pool.x[each.key]
  id       = each.value
}`,
			imports: []string{`pool.x["p"]=pool.a["p"]`, `pool.x["q"]=pool.a["q"]`},
			actions: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.write(tt.made)
			if _, _, err := h.apply(refresh()); err != nil {
				t.Fatal(err)
			}
			ids := h.objectIDs()
			made := h.world.IDs()
			var lines []string
			for addr, id := range ids {
				lines = append(lines, strconvQuote(addr)+" = "+strconvQuote(id))
			}
			vars := "variable \"ids\" {\n  default = {\n" + strings.Join(lines, "\n") + "\n  }\n}\n"
			h.state = state.New()
			h.write(vars + tt.config)
			p, err := h.plan(refresh())
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, imp := range tt.imports {
				to, from, _ := strings.Cut(imp, "=")
				want = append(want, to+"="+ids[from])
			}
			sort.Strings(want)
			if got := imports(p); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("imports %v, want %v", got, want)
			}
			if got := actions(p); !equalMaps(got, tt.actions) {
				t.Fatalf("actions %v, want %v", got, tt.actions)
			}
			if !p.HasChanges() {
				t.Fatal("a plan that imports has no changes")
			}
			_, res, err := h.apply(refresh())
			if err != nil {
				t.Fatal(err)
			}
			if res.Imported != len(want) {
				t.Fatalf("apply imported %d, want %d", res.Imported, len(want))
			}
			after := h.objectIDs()
			for _, imp := range want {
				addr, id, _ := strings.Cut(imp, "=")
				if after[addr] != id {
					t.Fatalf("state holds %q at %s, want the imported %q", after[addr], addr, id)
				}
			}
			// Nothing made again: the world holds what the first
			// configuration made, plus what this one creates.
			for _, id := range made {
				if !contains(h.world.IDs(), id) {
					t.Fatalf("object %s was destroyed", id)
				}
			}
			p, err = h.plan(refresh())
			if err != nil {
				t.Fatal(err)
			}
			if len(imports(p)) != 0 || p.HasChanges() {
				t.Fatalf("second plan: imports %v, actions %v", imports(p), actions(p))
			}
		})
	}
}

func strconvQuote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestImportBlockErrors: an import block pond cannot carry out is an
// error naming where it is, and imports nothing.
func TestImportBlockErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string
		line   int
	}{
		{"undeclared target", "pool \"a\" {}\nimport {\n  to = pool.x\n  id = \"syn-1\"\n}", "Configuration for import target does not exist", 3},
		{"key on single", "pool \"x\" {}\nimport {\n  to = pool.x[0]\n  id = \"syn-1\"\n}", "Unexpected instance key", 3},
		{"no key on count", "pool \"x\" {\n  count = 1\n}\nimport {\n  to = pool.x\n  id = \"syn-1\"\n}", "Import target needs an instance key", 5},
		{"key outside count", "pool \"x\" {\n  count = 1\n}\nimport {\n  to = pool.x[3]\n  id = \"syn-1\"\n}", "Configuration for import target does not exist", 5},
		{"missing object", "pool \"x\" {}\nimport {\n  to = pool.x\n  id = \"nothing\"\n}", "Cannot import pool.x", 2},
		{"other object in state", "pool \"a\" {}\nimport {\n  to = pool.a\n  id = \"syn-9\"\n}", "Import target already managed", 3},
		{"object at another address", "pool \"a\" {}\npool \"b\" {}\nimport {\n  to = pool.b\n  id = \"syn-1\"\n}", "Object already managed by pond", 4},
		{"two blocks one object", "pool \"x\" {}\npool \"y\" {}\nimport {\n  to = pool.x\n  id = \"syn-1\"\n}\nimport {\n  to = pool.y\n  id = \"syn-1\"\n}", "Duplicate import of one object", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.write(`pool "a" {}`)
			if _, _, err := h.apply(refresh()); err != nil {
				t.Fatal(err)
			}
			if tt.name != "other object in state" && tt.name != "object at another address" {
				h.state = state.New()
			}
			before := h.objectIDs()
			h.write(tt.config)
			_, err := h.plan(refresh())
			if err == nil {
				t.Fatalf("plan succeeded, want %q", tt.want)
			}
			var found *hcl.Diagnostic
			for _, d := range diagsOf(err) {
				if d.Summary == tt.want || strings.HasPrefix(d.Summary, tt.want) {
					found = d
				}
			}
			if found == nil {
				t.Fatalf("no %q in %v", tt.want, err)
			}
			if found.Subject == nil || found.Subject.Start.Line != tt.line || !strings.HasSuffix(found.Subject.Filename, "main.pond.hcl") {
				t.Fatalf("%q at %v, want main.pond.hcl line %d", tt.want, found.Subject, tt.line)
			}
			if after := h.objectIDs(); !equalMaps(before, after) {
				t.Fatalf("state changed: %v, then %v", before, after)
			}
		})
	}
}

// TestImportAlreadyInState: an import block whose instance the state
// holds, with its ID, imports nothing and changes nothing.
func TestImportAlreadyInState(t *testing.T) {
	h := newHarness(t)
	h.write(`pool "a" {}`)
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	h.write("pool \"a\" {}\nimport {\n  to = pool.a\n  id = \"syn-1\"\n}")
	before := h.world.Calls["Import"]
	p, err := h.plan(refresh())
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() || len(imports(p)) != 0 {
		t.Fatalf("imports %v, actions %v", imports(p), actions(p))
	}
	if h.world.Calls["Import"] != before {
		t.Fatal("the provider was asked to import an object already in the state")
	}
}

// TestGenerateImportConfig writes the block of an undeclared import
// target; with it the configuration plans the import and nothing else.
func TestGenerateImportConfig(t *testing.T) {
	h := newHarness(t)
	h.write("pool \"a\" {\n  nodes  = 3\n  labels = { site = \"x\" }\n  secret = \"s3\"\n}")
	if _, _, err := h.apply(refresh()); err != nil {
		t.Fatal(err)
	}
	h.state = state.New()
	imp := "import {\n  to = pool.x\n  id = \"syn-1\"\n}\n"
	h.write(imp)
	e, err := h.engine()
	if err != nil {
		t.Fatal(err)
	}
	src, diags := e.GenerateImportConfig(context.Background(), h.state)
	e.Close()
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := string(src)
	for _, want := range []string{`pool "x" {`, "nodes  = 3", `site = "x"`, "secret = null"} {
		if !strings.Contains(got, want) {
			t.Fatalf("generated configuration lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "s3") || strings.Contains(got, "id ") {
		t.Fatalf("generated configuration holds a sensitive or computed value:\n%s", got)
	}
	h.write(imp + strings.Replace(got, "secret = null", `secret = "s3"`, 1))
	p, err := h.plan(refresh())
	if err != nil {
		t.Fatal(err)
	}
	if got := imports(p); len(got) != 1 || len(actions(p)) != 0 {
		t.Fatalf("imports %v, actions %v", got, actions(p))
	}
}

// TestCheckBlocks evaluates check blocks at plan and after apply: a false
// assertion is a warning naming its condition, never an error; an
// assertion unknown until apply is not judged at plan; a check reads its
// own data source.
func TestCheckBlocks(t *testing.T) {
	tests := []struct {
		name   string
		config string
		// planWarn and applyWarn are the messages of the failing
		// assertions, at plan and after apply.
		planWarn, applyWarn []string
		status              planner.CheckStatus
	}{
		{
			name:   "passes",
			config: "check \"ok\" {\n  assert {\n    condition     = var.n == 2\n    error_message = \"n is not 2\"\n  }\n}",
			status: planner.CheckPass,
		},
		{
			name:      "fails",
			config:    "check \"size\" {\n  assert {\n    condition     = pool.a.nodes > 5\n    error_message = \"pool a has ${pool.a.nodes} nodes\"\n  }\n}",
			planWarn:  []string{"pool a has 2 nodes"},
			applyWarn: []string{"pool a has 2 nodes"},
			status:    planner.CheckFail,
		},
		{
			name:      "unknown until apply",
			config:    "check \"id\" {\n  assert {\n    condition     = pool.a.id == \"nothing\"\n    error_message = \"pool a is ${pool.a.id}\"\n  }\n}",
			applyWarn: []string{"pool a is syn-1"},
			status:    planner.CheckUnknown,
		},
		{
			name:      "scoped data source",
			config:    "check \"query\" {\n  data \"sea_query\" \"q\" {\n    requirements = \"Cpus > ${var.n}\"\n  }\n  assert {\n    condition     = length(data.sea_query.q.matches) > 5\n    error_message = \"only ${length(data.sea_query.q.matches)} matches for ${data.sea_query.q.requirements}\"\n  }\n}",
			planWarn:  []string{"only 2 matches for Cpus > 2"},
			applyWarn: []string{"only 2 matches for Cpus > 2"},
			status:    planner.CheckFail,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.write("variable \"n\" {\n  default = 2\n}\npool \"a\" {\n  nodes = var.n\n}\n" + tt.config)
			e, err := h.engine()
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			p, diags := e.Plan(context.Background(), h.state, refresh())
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if got := checkWarnings(diags); strings.Join(got, "|") != strings.Join(tt.planWarn, "|") {
				t.Fatalf("plan warnings %q, want %q", got, tt.planWarn)
			}
			if len(p.Checks) != 1 || p.Checks[0].Status != tt.status {
				t.Fatalf("plan checks %+v, want status %s", p.Checks, tt.status)
			}
			res, diags := e.Apply(context.Background(), p, planner.ApplyOptions{})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if got := checkWarnings(diags); strings.Join(got, "|") != strings.Join(tt.applyWarn, "|") {
				t.Fatalf("apply warnings %q, want %q", got, tt.applyWarn)
			}
			if len(res.Checks) != 1 || (res.Checks[0].Status == planner.CheckFail) != (len(tt.applyWarn) > 0) {
				t.Fatalf("apply checks %+v", res.Checks)
			}
			if !p.Checks[0].Evaluated || !res.Checks[0].Evaluated {
				t.Fatalf("checks not marked evaluated: plan %+v, apply %+v", p.Checks, res.Checks)
			}
			// The state keeps the apply's outcome, as Terraform's
			// check_results, and a destroy, which evaluates no check,
			// leaves it unknown.
			addr := "check." + res.Checks[0].Name
			wantState := func(cs []*state.CheckResult, status string, objects bool) {
				t.Helper()
				if len(cs) != 1 || cs[0].ObjectKind != "check" || cs[0].ConfigAddr != addr || cs[0].Status != status {
					t.Fatalf("state check results %+v, want %s %s", cs, addr, status)
				}
				if !objects {
					if cs[0].Objects != nil {
						t.Fatalf("unevaluated check has objects %+v", cs[0].Objects)
					}
					return
				}
				if len(cs[0].Objects) != 1 || cs[0].Objects[0].ObjectAddr != addr || cs[0].Objects[0].Status != status ||
					strings.Join(cs[0].Objects[0].FailureMessages, "|") != strings.Join(tt.applyWarn, "|") {
					t.Fatalf("state check objects %+v, want %s %s %q", cs[0].Objects[0], addr, status, tt.applyWarn)
				}
			}
			wantState(res.State.CheckResults, res.Checks[0].Status.String(), true)
			dp, diags := e.Plan(context.Background(), res.State, planner.PlanOptions{Mode: planner.DestroyMode, Refresh: true})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if len(dp.Checks) != 1 || dp.Checks[0].Evaluated || dp.Checks[0].Status != planner.CheckUnknown {
				t.Fatalf("destroy plan checks %+v, want one unevaluated", dp.Checks)
			}
			dres, diags := e.Apply(context.Background(), dp, planner.ApplyOptions{})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			wantState(dres.State.CheckResults, "unknown", false)
		})
	}
}

// checkWarnings returns the first lines of the details of the failed
// check assertions in diags, each after checking that the warning names
// the condition's place.
func checkWarnings(diags hcl.Diagnostics) []string {
	var out []string
	for _, d := range diags {
		if d.Summary != "Check block assertion failed" {
			continue
		}
		if d.Severity != hcl.DiagWarning || d.Subject == nil || !strings.Contains(d.Detail, "main.pond.hcl:") {
			out = append(out, "(bad diagnostic: "+d.Error()+")")
			continue
		}
		msg, _, _ := strings.Cut(d.Detail, "\n")
		out = append(out, msg)
	}
	return out
}
