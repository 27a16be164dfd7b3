package acceptance

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// showChecks is the checks list of a show -json document, each check as
// "ADDRESS STATUS" followed by its instances as
// "[INSTANCE STATUS: PROBLEM; PROBLEM]", after checking the fields every
// element of Terraform's checks representation has.
func showChecks(t *testing.T, out string) []string {
	t.Helper()
	var doc struct {
		PondVersion string `json:"pond_version"`
		Checks      []struct {
			Note    string `json:"//"`
			Address struct {
				Kind      string `json:"kind"`
				Name      string `json:"name"`
				ToDisplay string `json:"to_display"`
			} `json:"address"`
			Status    string `json:"status"`
			Instances []struct {
				Address struct {
					ToDisplay string `json:"to_display"`
				} `json:"address"`
				Status   string `json:"status"`
				Problems []struct {
					Message string `json:"message"`
				} `json:"problems"`
			} `json:"instances"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("show -json: %v\n%s", err, out)
	}
	if doc.PondVersion == "" {
		t.Fatalf("show -json has no pond_version:\n%s", out)
	}
	var got []string
	for _, c := range doc.Checks {
		a := c.Address
		if c.Note != "EXPERIMENTAL: see docs for details" || a.Kind != "check" || a.ToDisplay != "check."+a.Name {
			t.Fatalf("check %+v lacks Terraform's fields:\n%s", c, out)
		}
		s := a.ToDisplay + " " + c.Status
		for _, inst := range c.Instances {
			var ps []string
			for _, p := range inst.Problems {
				ps = append(ps, p.Message)
			}
			s += fmt.Sprintf(" [%s %s: %s]", inst.Address.ToDisplay, inst.Status, strings.Join(ps, "; "))
		}
		got = append(got, s)
	}
	return got
}

// TestShowJSONChecks checks the checks list of show -json, as Terraform
// prints it, against a real local pool: a saved plan has every check
// block's status as the plan judged it (unknown while it depends on what
// only the apply knows), the state the statuses and the failing
// assertions' messages of the last apply, and the next saved plan both
// the failing and the passing check.
func TestShowJSONChecks(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", checkedPool)
	want := func(what string, got, want []string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s: checks\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	w.expect(2, "plan", "-out", "first.plan", "-detailed-exitcode")
	want("the first plan", showChecks(t, w.expect(0, "show", "-json", "first.plan").stdout), []string{
		"check.cm unknown [check.cm unknown: ]",
		"check.size unknown [check.size unknown: ]",
	})

	w.expect(0, "apply", "first.plan")
	applied := []string{
		"check.cm pass [check.cm pass: ]",
		"check.size fail [check.size fail: pool p runs 2 nodes, not 3.]",
	}
	want("the state after apply", showChecks(t, w.expect(0, "show", "-json").stdout), applied)

	w.expect(0, "plan", "-out", "second.plan", "-detailed-exitcode")
	want("the plan after apply", showChecks(t, w.expect(0, "show", "-json", "second.plan").stdout), applied)

	// A destroy evaluates no check: the state says so.
	w.expect(0, "destroy", "-auto-approve")
	want("the state after destroy", showChecks(t, w.expect(0, "show", "-json").stdout), []string{
		"check.cm unknown",
		"check.size unknown",
	})
}
