package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/state"
)

func (m *meta) cmdOutput(ctx context.Context, args []string) int {
	fs := m.newFlagSet("output", "output [-json] [-raw] [NAME]")
	jsonOut := fs.Bool("json", false, "print as JSON")
	raw := fs.Bool("raw", false, "print a string output without quotes")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() > 1 {
		return m.errorf("output takes at most one name")
	}
	cfg, _ := config.LoadDir(m.dir, loadOptions())
	b, err := m.backendFor(ctx, cfg)
	if err != nil {
		return m.fail("Invalid backend configuration", err)
	}
	s, err := b.Read(ctx)
	if err != nil {
		return m.fail("Failed to load state", err)
	}
	if s == nil {
		// Nothing was applied here (or the backend points elsewhere):
		// say so, rather than that one output is missing.
		where := m.stateWhere(b)
		switch {
		case fs.Arg(0) != "":
			return m.errorf("No state: output %q cannot be read because there is no state at %s. Nothing has been applied in this working directory (or its backend points elsewhere): run \"pondctl apply\" first.", fs.Arg(0), where)
		case *jsonOut:
			fmt.Fprintln(m.stdout, "{}")
		default:
			fmt.Fprintf(m.stderr, "Warning: No outputs found: there is no state at %s. Nothing has been applied in this working directory (or its backend points elsewhere); run \"pondctl apply\" first.\n", where)
		}
		return 0
	}
	if name := fs.Arg(0); name != "" {
		o, ok := s.Outputs[name]
		if !ok {
			return m.errorf("Output %q not found: the state has no output named %q. Apply the configuration first, or check the name.", name, name)
		}
		if o.Hash != "" {
			return m.errorf("Output %q is not stored: its value derives from a sensitive value, of which the state keeps only a keyed hash. Use the variable it comes from.", name)
		}
		v, err := decodeOutputValue(o)
		if err != nil {
			return m.fail("Invalid output in state", err)
		}
		switch {
		case *jsonOut:
			fmt.Fprintln(m.stdout, string(o.Value))
		case *raw:
			if !v.Type().IsPrimitiveType() || v.IsNull() {
				return m.errorf("Unsupported value for raw output: -raw prints only strings, numbers and bools; output %q is %s. Use -json.", name, v.Type().FriendlyName())
			}
			if v.Type() == cty.String {
				fmt.Fprint(m.stdout, v.AsString())
			} else {
				fmt.Fprint(m.stdout, formatValue(v, 0))
			}
		default:
			fmt.Fprintln(m.stdout, formatValue(v, 0))
		}
		return 0
	}
	if *jsonOut {
		out := map[string]any{}
		for n, o := range s.Outputs {
			var v, ty any
			_ = json.Unmarshal(o.Value, &v)
			_ = json.Unmarshal(o.Type, &ty)
			out[n] = map[string]any{"sensitive": o.Sensitive, "type": ty, "value": v}
		}
		return m.printJSON(out)
	}
	if len(s.Outputs) == 0 {
		fmt.Fprintln(m.stderr, "Warning: No outputs found. The state has no outputs; apply a configuration that declares some.")
		return 0
	}
	names := make([]string, 0, len(s.Outputs))
	for n := range s.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o := s.Outputs[n]
		if o.Sensitive {
			fmt.Fprintf(m.stdout, "%s = <sensitive>\n", n)
			continue
		}
		v, err := decodeOutputValue(o)
		if err != nil {
			return m.fail("Invalid output in state", err)
		}
		fmt.Fprintf(m.stdout, "%s = %s\n", n, formatValue(v, 0))
	}
	return 0
}

// printOutputs prints the root outputs of s after an apply.
func (m *meta) printOutputs(s *state.State) {
	if len(s.Outputs) == 0 {
		return
	}
	names := make([]string, 0, len(s.Outputs))
	for n := range s.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(m.stdout, "\n%s\n\n", m.col().bold(m.col().green("Outputs:")))
	for _, n := range names {
		o := s.Outputs[n]
		if o.Sensitive {
			fmt.Fprintf(m.stdout, "%s = <sensitive>\n", n)
			continue
		}
		v, err := decodeOutputValue(o)
		if err != nil {
			fmt.Fprintf(m.stdout, "%s = %s\n", n, string(o.Value))
			continue
		}
		fmt.Fprintf(m.stdout, "%s = %s\n", n, formatValue(v, 0))
	}
}

// stateWhere names where backend b keeps the state: a local file's path
// (relative to the working directory when under it), an S3 URL.
func (m *meta) stateWhere(b state.Backend) string {
	switch b := b.(type) {
	case interface{ Path() string }:
		return m.relPath(b.Path())
	case interface{ URL() string }:
		return b.URL()
	}
	return "the configured backend"
}
