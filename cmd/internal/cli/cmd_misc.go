package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

func (m *meta) cmdVersion(args []string) int {
	fs := m.newFlagSet("version", "version [-json]")
	jsonOut := fs.Bool("json", false, "print as JSON")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	platform := runtime.GOOS + "_" + runtime.GOARCH
	if *jsonOut {
		return m.printJSON(map[string]any{"pond_version": Version, "platform": platform, "go_version": runtime.Version()})
	}
	fmt.Fprintf(m.stdout, "Pond v%s\non %s\n", Version, platform)
	return 0
}

func (m *meta) printJSON(v any) int {
	enc := json.NewEncoder(m.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return m.fail("Cannot print JSON", err)
	}
	return 0
}

func (m *meta) cmdInit(ctx context.Context, args []string) int {
	fs := m.newFlagSet("init", "init [-no-color]")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	cfg, ok := m.loadConfig()
	if !ok {
		return 1
	}
	c := m.col()
	fmt.Fprintln(m.stdout, c.bold("Initializing the backend..."))
	b, err := m.backendFor(ctx, cfg)
	if err != nil {
		return m.fail("Invalid backend configuration", err)
	}
	if _, err := b.Read(ctx); err != nil {
		return m.fail("Failed to read the state", err)
	}
	fmt.Fprintln(m.stdout, c.bold("\nInitializing provider plugins..."))
	used := map[string]bool{}
	for _, r := range cfg.Resources {
		name := resourceTypes[r.Type]
		if r.Mode == config.DataResource {
			name = dataTypes[r.Type]
		}
		if r.ProviderRef != nil {
			name = r.ProviderRef.Name
		}
		used[name] = true
	}
	names := make([]string, 0, len(used))
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	reg := providerRegistry()
	for _, n := range names {
		if _, ok := reg[n]; !ok {
			return m.errorf("Unknown provider %q: pond embeds %s", n, strings.Join(registryNames(reg), ", "))
		}
		fmt.Fprintf(m.stdout, "- Using the embedded %q provider (v%s)\n", n, Version)
	}
	if err := os.MkdirAll(filepath.Join(m.dir, ".pond"), 0o755); err != nil {
		return m.fail("Cannot create the .pond directory", err)
	}
	fmt.Fprintf(m.stdout, "\n%s\n\nYou may now begin working with pond. Try running \"pondctl plan\" to see any changes that are required for your infrastructure.\n", c.bold(c.green("Pond has been successfully initialized!")))
	return 0
}

func registryNames(reg map[string]providers.Factory) []string {
	out := make([]string, 0, len(reg))
	for n := range reg {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (m *meta) cmdValidate(ctx context.Context, args []string) int {
	fs := m.newFlagSet("validate", "validate [-json] [-no-color]")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if *jsonOut {
		m.color = false
	}
	cfg, diags := config.LoadDir(m.dir, loadOptions())
	if cfg != nil {
		m.files = cfg.Files
		if !diags.HasErrors() {
			diags = append(diags, cfg.Validate()...)
		}
		if !diags.HasErrors() {
			eng := m.engine(cfg, unknownVars(cfg), "", nil)
			diags = append(diags, eng.Validate(ctx)...)
			eng.Close()
		}
	}
	if *jsonOut {
		m.printJSON(map[string]any{
			"format_version": "1.0",
			"valid":          !diags.HasErrors(),
			"error_count":    countSeverity(diags, hcl.DiagError),
			"warning_count":  countSeverity(diags, hcl.DiagWarning),
			"diagnostics":    config.DiagnosticsJSON(diags),
		})
		if diags.HasErrors() {
			return 1
		}
		return 0
	}
	if m.diags(diags) {
		return 1
	}
	fmt.Fprintln(m.stdout, m.col().green("Success!")+" The configuration is valid.")
	return 0
}

// unknownVars gives every variable an unknown value of its type, so that
// validate checks the configuration for every possible input.
func unknownVars(cfg *config.Config) map[string]cty.Value {
	out := map[string]cty.Value{}
	for name, v := range cfg.Variables {
		ty := v.Type
		if ty == cty.NilType {
			ty = cty.DynamicPseudoType
		}
		out[name] = cty.UnknownVal(ty)
	}
	return out
}

func countSeverity(d hcl.Diagnostics, sev hcl.DiagnosticSeverity) int {
	n := 0
	for _, x := range d {
		if x.Severity == sev {
			n++
		}
	}
	return n
}

func (m *meta) cmdFmt(args []string) int {
	fs := m.newFlagSet("fmt", "fmt [-check] [-diff] [-recursive] [-list=false] [DIR or FILE...]")
	check := fs.Bool("check", false, "check formatting only; exit 3 when a file needs formatting")
	diff := fs.Bool("diff", false, "print the differences")
	recursive := fs.Bool("recursive", false, "also format subdirectories")
	list := fs.Bool("list", true, "list the files whose formatting differs")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	paths := fs.Args()
	if len(paths) == 0 {
		paths = []string{m.dir}
	}
	changed := false
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(m.dir, p)
		}
		res, d := config.FormatPath(p, config.FmtOptions{Recursive: *recursive, Write: !*check, Diff: *diff})
		if m.diags(d) {
			return 2
		}
		for _, r := range res {
			changed = true
			if *list {
				rel, err := filepath.Rel(m.dir, r.Path)
				if err != nil {
					rel = r.Path
				}
				fmt.Fprintln(m.stdout, rel)
			}
			if *diff && r.Diff != "" {
				fmt.Fprint(m.stdout, r.Diff)
			}
		}
	}
	if *check && changed {
		return 3
	}
	return 0
}

// schemaFor returns the schema of a resource recorded in state. Provider
// schemas are built once per command.
func (m *meta) schemaFor(r *state.Resource) *providers.Schema {
	name := strings.TrimPrefix(r.Provider, "provider.")
	name, _, _ = strings.Cut(name, ".")
	if m.schemas == nil {
		m.schemas = map[string]*providers.ProviderSchema{}
	}
	s, ok := m.schemas[name]
	if !ok {
		if f, found := providerRegistry()[name]; found {
			p := f()
			s = p.Schema()
			_ = p.Close()
		}
		m.schemas[name] = s
	}
	if s == nil {
		return nil
	}
	if r.Mode == state.ModeData {
		return s.DataSources[r.Type]
	}
	return s.Resources[r.Type]
}

// instanceValue decodes an instance's attributes with its schema, falling
// back to the JSON as it is.
func (m *meta) instanceValue(r *state.Resource, inst *state.Instance) cty.Value {
	if s := m.schemaFor(r); s != nil {
		if v, err := ctyjson.Unmarshal(inst.Attributes, s.ImpliedType()); err == nil {
			return v
		}
	}
	var sv ctyjson.SimpleJSONValue
	if err := sv.UnmarshalJSON(inst.Attributes); err == nil {
		return sv.Value
	}
	return cty.NullVal(cty.DynamicPseudoType)
}

func decodeOutputValue(o *state.Output) (cty.Value, error) {
	ty, err := ctyjson.UnmarshalType(o.Type)
	if err != nil {
		return cty.NilVal, err
	}
	return ctyjson.Unmarshal(o.Value, ty)
}

// loadStateOnly reads the state of the working directory's backend.
func (m *meta) loadStateOnly(ctx context.Context) (state.Backend, *state.State, bool) {
	cfg, _ := config.LoadDir(m.dir, loadOptions())
	b, err := m.backendFor(ctx, cfg)
	if err != nil {
		m.fail("Invalid backend configuration", err)
		return nil, nil, false
	}
	s, ok := m.readState(ctx, b)
	return b, s, ok
}

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
		if sp, _, err := readPlanFile(path); err == nil {
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
		data, err := os.ReadFile(path)
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
			if av := v.GetAttr(n); av.IsNull() {
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

func (m *meta) cmdOutput(ctx context.Context, args []string) int {
	fs := m.newFlagSet("output", "output [-json] [-raw] [NAME]")
	jsonOut := fs.Bool("json", false, "print as JSON")
	raw := fs.Bool("raw", false, "print a string output without quotes")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	_, s, ok := m.loadStateOnly(ctx)
	if !ok {
		return 1
	}
	if fs.NArg() > 1 {
		return m.errorf("output takes at most one name")
	}
	if name := fs.Arg(0); name != "" {
		o, ok := s.Outputs[name]
		if !ok {
			return m.errorf("Output %q not found: the state has no output named %q. Apply the configuration first, or check the name.", name, name)
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

func (m *meta) cmdForceUnlock(ctx context.Context, args []string) int {
	fs := m.newFlagSet("force-unlock", "force-unlock [-force] LOCK_ID")
	force := fs.Bool("force", false, "do not ask for confirmation")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 1 {
		return m.errorf("force-unlock needs exactly one argument: the lock ID")
	}
	id := fs.Arg(0)
	cfg, _ := config.LoadDir(m.dir, loadOptions())
	b, err := m.backendFor(ctx, cfg)
	if err != nil {
		return m.fail("Invalid backend configuration", err)
	}
	if !*force && !m.confirm("Do you really want to force-unlock?", "Pond will remove the lock on the state. This will allow local pond commands to modify this state, even though it may still be in use.") {
		fmt.Fprintln(m.stderr, "force-unlock cancelled.")
		return 1
	}
	if err := b.ForceUnlock(ctx, id); err != nil {
		return m.fail("Failed to unlock state", err)
	}
	fmt.Fprintln(m.stdout, m.col().bold(m.col().green("Pond state has been successfully unlocked!")))
	return 0
}

func (m *meta) cmdImport(ctx context.Context, args []string) int {
	var vf varFlags
	var lf lockFlags
	fs := m.newFlagSet("import", "import [options] ADDR ID")
	vf.register(fs)
	lf.register(fs)
	input := fs.Bool("input", true, "ask for missing variable values")
	sea := fs.String("sea", "", "API address of an agent in the sea")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 2 {
		return m.errorf("import needs two arguments: the resource address and the ID of the object to import")
	}
	addr, err := state.ParseAddress(fs.Arg(0))
	if err != nil {
		return m.fail("Invalid resource address", err)
	}
	cfg, ok := m.loadConfig()
	if !ok {
		return 1
	}
	vars, ok := m.collectVars(cfg, &vf, *input)
	if !ok {
		return 1
	}
	b, prior, unlock, ok := m.lockedState(ctx, cfg, lf, "OperationTypeImport")
	if !ok {
		return 1
	}
	defer unlock()
	eng := m.engine(cfg, vars, m.seaAddr(*sea, cfg), nil)
	defer eng.Close()
	fmt.Fprintf(m.stdout, "%s Importing from ID %q...\n", m.col().bold(addr.String()+":"), fs.Arg(1))
	next, diags := eng.Import(ctx, prior, addr, fs.Arg(1))
	if m.diags(diags) {
		return 1
	}
	if err := (&statePersister{b: b, last: prior}).WriteState(ctx, next); err != nil {
		return m.fail("Failed to save state", err)
	}
	fmt.Fprintf(m.stdout, "%s Import complete!\n\n%s\n\nThe resources that were imported are shown above. These resources are now in your pond state and will henceforth be managed by pond.\n", m.col().bold(addr.String()+":"), m.col().bold(m.col().green("Import successful!")))
	return 0
}
