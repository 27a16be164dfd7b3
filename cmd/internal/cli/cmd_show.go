package cli

import (
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/pond-htc/pond/state"
)

func (m *meta) cmdShow(ctx context.Context, args []string) int {
	fs := m.newFlagSet("show", "show [-json] [-no-color] [PLAN-OR-STATE-FILE]")
	jsonOut := fs.Bool("json", false, "print as JSON")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if *jsonOut {
		m.color = false
	}
	var s *state.State
	if fs.NArg() == 1 {
		path := fs.Arg(0)
		if sp, _, err := readPlanFile(m.path(path)); err == nil {
			if *jsonOut {
				_, err := m.stdout.Write(append(sp.Plan, '\n'))
				if err != nil {
					return 1
				}
				return 0
			}
			fmt.Fprint(m.stdout, sp.Rendered)
			return 0
		}
		data, err := os.ReadFile(m.path(path))
		if err != nil {
			return m.fail("Cannot read "+path, err)
		}
		if s, err = state.Decode(data, path); err != nil {
			return m.fail(path+" is neither a plan file nor a state file", err)
		}
	} else if fs.NArg() > 1 {
		return m.errorf("show takes at most one file")
	} else {
		var ok bool
		if _, s, ok = m.loadStateOnly(ctx); !ok {
			return 1
		}
	}
	if *jsonOut {
		return m.printJSON(stateJSON(s, func(r *state.Resource, inst *state.Instance) any { return valueJSON(m.instanceValue(r, inst)) }))
	}
	if len(s.Resources) == 0 && len(s.Outputs) == 0 {
		fmt.Fprintln(m.stdout, "No state.")
		return 0
	}
	for _, r := range s.Resources {
		for _, inst := range r.Instances {
			m.showInstance(r, inst)
		}
	}
	m.printOutputs(s)
	return 0
}

func (m *meta) showInstance(r *state.Resource, inst *state.Instance) {
	addr := state.Address{Mode: r.Mode, Type: r.Type, Name: r.Name, Key: inst.IndexKey}
	fmt.Fprintf(m.stdout, "# %s:\n", addr)
	if inst.Status == "tainted" {
		fmt.Fprintln(m.stdout, "# (tainted)")
	}
	head := fmt.Sprintf("%s %q", r.Type, r.Name)
	if r.Mode == state.ModeData {
		head = fmt.Sprintf("data %q %q", r.Type, r.Name)
	}
	fmt.Fprintf(m.stdout, "%s {\n", head)
	v := m.instanceValue(r, inst)
	sens := map[string]bool{}
	for _, s := range inst.SensitiveAttributes {
		sens[s] = true
	}
	if v.Type().IsObjectType() && !v.IsNull() {
		names := make([]string, 0)
		width := 0
		for n := range v.Type().AttributeTypes() {
			if av := v.GetAttr(n); av.IsNull() && !av.IsMarked() {
				continue
			}
			names = append(names, n)
			width = max(width, len(n))
		}
		sort.Strings(names)
		for _, n := range names {
			val := formatValue(v.GetAttr(n), 4)
			if sens[n] {
				val = "(sensitive value)"
			}
			fmt.Fprintf(m.stdout, "    %-*s = %s\n", width, n, val)
		}
	}
	fmt.Fprintln(m.stdout, "}")
	fmt.Fprintln(m.stdout)
}
