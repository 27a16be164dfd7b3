package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// File name suffixes of configuration files.
const (
	NativeSuffix = ".pond.hcl"
	JSONSuffix   = ".pond.json"
)

// DefaultManagedTypes are the managed resource types used when
// LoadOptions.ManagedTypes is empty.
var DefaultManagedTypes = []string{"pool", "pond", "flock", "glidein"}

// DefaultDataTypes are the data source types used when
// LoadOptions.DataTypes is empty.
var DefaultDataTypes = []string{"sea_query"}

// LoadOptions says which resource types the loader accepts. The planner
// fills it from the providers it knows.
type LoadOptions struct {
	// ManagedTypes are the block types of managed resources
	// (DefaultManagedTypes when empty).
	ManagedTypes []string
	// DataTypes are the types accepted in data "TYPE" "NAME" blocks
	// (DefaultDataTypes when empty).
	DataTypes []string
}

func (o LoadOptions) managed() []string {
	if len(o.ManagedTypes) == 0 {
		return DefaultManagedTypes
	}
	return o.ManagedTypes
}

func (o LoadOptions) data() []string {
	if len(o.DataTypes) == 0 {
		return DefaultDataTypes
	}
	return o.DataTypes
}

// IsConfigFile reports whether a file name is one of a configuration's
// files: *.pond.hcl or *.pond.json, and not an editor's backup or lock file.
func IsConfigFile(name string) bool {
	base := filepath.Base(name)
	if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "#") || strings.HasSuffix(base, "~") {
		return false
	}
	return strings.HasSuffix(base, NativeSuffix) || strings.HasSuffix(base, JSONSuffix)
}

// LoadDir loads every *.pond.hcl and *.pond.json file of dir as one
// configuration. It returns the configuration decoded as far as possible
// even when there are errors, so that callers can still print diagnostics
// with source snippets from Config.Files; the result is never nil.
func LoadDir(dir string, opts LoadOptions) (*Config, hcl.Diagnostics) {
	cfg := newConfig(dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return cfg, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read configuration directory",
			Detail:   fmt.Sprintf("The directory %s could not be read: %s.", dir, err),
		}}
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() || !IsConfigFile(e.Name()) {
			continue
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	paths := make([]string, len(names))
	for i, name := range names {
		paths[i] = filepath.Join(dir, name)
	}
	return cfg, cfg.addFiles(paths, os.ReadFile, opts)
}

// LoadFiles loads a configuration from in-memory sources keyed by file name
// (which must end in .pond.hcl or .pond.json). Files are read in name order.
func LoadFiles(dir string, sources map[string][]byte, opts LoadOptions) (*Config, hcl.Diagnostics) {
	cfg := newConfig(dir)
	names := make([]string, 0, len(sources))
	for name := range sources {
		names = append(names, name)
	}
	sort.Strings(names)
	return cfg, cfg.addFiles(names, func(name string) ([]byte, error) { return sources[name], nil }, opts)
}

func newConfig(dir string) *Config {
	return &Config{
		Dir:       dir,
		Files:     map[string]*hcl.File{},
		Variables: map[string]*Variable{},
		Locals:    map[string]*Local{},
		Outputs:   map[string]*Output{},
		Providers: map[string]*Provider{},
		Resources: map[string]*Resource{},
	}
}

// loader carries the per-load state of decoding.
type loader struct {
	cfg     *Config
	opts    LoadOptions
	managed map[string]bool
	data    map[string]bool
}

// parsedFile is the result of parsing one configuration file.
type parsedFile struct {
	name  string
	file  *hcl.File
	diags hcl.Diagnostics
}

// addFiles reads and parses the named files concurrently (parsing dominates
// the cost of loading a large configuration), then decodes them in order.
func (c *Config) addFiles(names []string, read func(string) ([]byte, error), opts LoadOptions) hcl.Diagnostics {
	parsed := make([]parsedFile, len(names))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			parsed[i] = parseFile(name, read)
		}()
	}
	wg.Wait()
	var diags hcl.Diagnostics
	for _, p := range parsed {
		diags = append(diags, c.addParsed(p, opts)...)
	}
	return diags
}

func parseFile(name string, read func(string) ([]byte, error)) parsedFile {
	src, err := read(name)
	if err != nil {
		return parsedFile{name: name, diags: hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read file",
			Detail:   fmt.Sprintf("The configuration file %s could not be read: %s.", name, err),
		}}}
	}
	p := parsedFile{name: name}
	if strings.HasSuffix(name, JSONSuffix) {
		p.file, p.diags = parseJSON(src, name)
	} else {
		p.file, _, p.diags = parseNative(src, name)
	}
	return p
}

// parseJSON parses JSON-syntax source.
func parseJSON(src []byte, filename string) (*hcl.File, hcl.Diagnostics) {
	if diags := checkNestingJSON(src, filename); diags.HasErrors() {
		return nil, diags
	}
	file, diags := hcljson.Parse(src, filename)
	if !utf8.Valid(src) {
		// As in parseNative: after a malformed UTF-8 sequence that runs
		// into a newline the lines and columns of hcl's diagnostics are
		// off, while their byte offsets are right. (The body needs no
		// fixing: a JSON string holds no raw newline, so such a sequence
		// is always an error.)
		newPosMapper(src, nil).fix(reflect.ValueOf(diags))
	}
	return file, diags
}

func (c *Config) addParsed(p parsedFile, opts LoadOptions) hcl.Diagnostics {
	file, diags, filename := p.file, p.diags, p.name
	isJSON := strings.HasSuffix(filename, JSONSuffix)
	if file == nil {
		return diags
	}
	c.Files[filename] = file
	if diags.HasErrors() && !isJSON {
		// A body with syntax errors decodes into a cascade of confusing
		// follow-on errors; report the syntax errors alone.
		return diags
	}
	if file.Body == nil {
		return diags
	}
	l := &loader{cfg: c, opts: opts, managed: map[string]bool{}, data: map[string]bool{}}
	for _, t := range opts.managed() {
		l.managed[t] = true
	}
	for _, t := range opts.data() {
		l.data[t] = true
	}
	if body, ok := file.Body.(*hclsyntax.Body); ok {
		diags = append(diags, l.decodeNative(body)...)
	} else {
		diags = append(diags, l.decodeJSON(file.Body)...)
	}
	return diags
}

// topLevelLabels gives the label names of the fixed top-level block types.
var topLevelLabels = map[string][]string{
	"variable": {"name"},
	"locals":   nil,
	"provider": {"name"},
	"output":   {"name"},
	"data":     {"type", "name"},
}

func (l *loader) decodeNative(body *hclsyntax.Body) hcl.Diagnostics {
	var diags hcl.Diagnostics
	attrs := make([]*hclsyntax.Attribute, 0, len(body.Attributes))
	for _, a := range body.Attributes {
		attrs = append(attrs, a)
	}
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].SrcRange.Start.Byte < attrs[j].SrcRange.Start.Byte })
	for _, a := range attrs {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unsupported argument",
			Detail:   fmt.Sprintf("An argument named %q is not expected at the top level of a configuration file; arguments belong inside blocks.", a.Name),
			Subject:  a.NameRange.Ptr(),
		})
	}
	for _, sb := range body.Blocks {
		blk := sb.AsHCLBlock()
		switch {
		case blk.Type == "pond" && len(blk.Labels) == 0:
			diags = append(diags, l.decodePondSettings(blk)...)
		case (blk.Type == "moved" || blk.Type == "removed" || blk.Type == "import") && !l.managed[blk.Type]:
			if d := checkLabels(blk, nil); d.HasErrors() {
				diags = append(diags, d...)
				continue
			}
			diags = append(diags, l.decodeRefactor(blk)...)
		case blk.Type == "check" && !l.managed[blk.Type]:
			if d := checkLabels(blk, []string{"name"}); d.HasErrors() {
				diags = append(diags, d...)
				continue
			}
			diags = append(diags, l.decodeCheck(blk)...)
		case topLevelLabels[blk.Type] != nil || blk.Type == "locals":
			if d := checkLabels(blk, topLevelLabels[blk.Type]); d.HasErrors() {
				diags = append(diags, d...)
				continue
			}
			diags = append(diags, l.decodeBlock(blk)...)
		case l.managed[blk.Type]:
			if d := checkLabels(blk, []string{"name"}); d.HasErrors() {
				diags = append(diags, d...)
				continue
			}
			diags = append(diags, l.decodeResource(blk, ManagedResource)...)
		default:
			diags = append(diags, l.unsupportedBlock(blk.Type, blk.TypeRange))
		}
	}
	return diags
}

func (l *loader) unsupportedBlock(typ string, rng hcl.Range) *hcl.Diagnostic {
	known := []string{"pond", "variable", "locals", "provider", "data", "output", "moved", "removed", "import", "check"}
	known = append(known, l.opts.managed()...)
	detail := fmt.Sprintf("Blocks of type %q are not expected here.", typ)
	if s := nameSuggestion(typ, known); s != "" {
		detail += fmt.Sprintf(" Did you mean %q?", s)
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Unsupported block type",
		Detail:   detail,
		Subject:  rng.Ptr(),
	}
}

// checkLabels reports a wrong number of labels on a block whose labels were
// not checked by a schema (native syntax top-level blocks).
func checkLabels(blk *hcl.Block, names []string) hcl.Diagnostics {
	switch {
	case len(blk.Labels) < len(names):
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Missing %s for %s", names[len(blk.Labels)], blk.Type),
			Detail:   fmt.Sprintf("All %s blocks must have %d labels (%s).", blk.Type, len(names), strings.Join(names, ", ")),
			Subject:  blk.DefRange.Ptr(),
		}}
	case len(blk.Labels) > len(names):
		detail := fmt.Sprintf("No more labels are expected: %s blocks have %d labels (%s).", blk.Type, len(names), strings.Join(names, ", "))
		if len(names) == 0 {
			detail = fmt.Sprintf("A %s block has no labels.", blk.Type)
		}
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Extraneous label for %s", blk.Type),
			Detail:   detail,
			Subject:  blk.LabelRanges[len(names)].Ptr(),
		}}
	}
	return nil
}

func (l *loader) decodeJSON(body hcl.Body) hcl.Diagnostics {
	schema := &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "pond"},
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "provider", LabelNames: []string{"name"}},
		{Type: "output", LabelNames: []string{"name"}},
		{Type: "data", LabelNames: []string{"type", "name"}},
		{Type: "moved"},
		{Type: "removed"},
		{Type: "import"},
		{Type: "check", LabelNames: []string{"name"}},
	}}
	for _, t := range l.opts.managed() {
		if t == "pond" || topLevelLabels[t] != nil || t == "locals" {
			continue
		}
		schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: t, LabelNames: []string{"name"}})
	}
	content, diags := body.Content(schema)
	for _, blk := range content.Blocks {
		switch {
		case blk.Type == "pond":
			diags = append(diags, l.decodeJSONPond(blk)...)
		case blk.Type == "moved" || blk.Type == "removed" || blk.Type == "import":
			diags = append(diags, l.decodeRefactor(blk)...)
		case blk.Type == "check":
			diags = append(diags, l.decodeCheck(blk)...)
		case topLevelLabels[blk.Type] != nil || blk.Type == "locals":
			diags = append(diags, l.decodeBlock(blk)...)
		default:
			diags = append(diags, l.decodeResource(blk, ManagedResource)...)
		}
	}
	return diags
}

// decodeJSONPond tells a JSON "pond" property holding the settings block
// ({"backend": ..., "sea": ...}) from one holding pond resources
// ({"NAME": {...}}): in JSON a pond resource may not be named "backend" or
// "sea".
func (l *loader) decodeJSONPond(blk *hcl.Block) hcl.Diagnostics {
	attrs, diags := blk.Body.JustAttributes()
	if diags.HasErrors() {
		return l.decodePondSettings(blk)
	}
	var names []string
	for name := range attrs {
		if name != "backend" && name != "sea" {
			names = append(names, name)
		}
	}
	if len(names) == 0 || !l.managed["pond"] {
		return l.decodePondSettings(blk)
	}
	sort.Slice(names, func(i, j int) bool {
		return attrs[names[i]].Range.Start.Byte < attrs[names[j]].Range.Start.Byte
	})
	schema := &hcl.BodySchema{}
	for _, n := range names {
		schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: n})
	}
	content, diags := blk.Body.Content(schema)
	for _, inner := range content.Blocks {
		res := &hcl.Block{
			Type:        "pond",
			Labels:      []string{inner.Type},
			Body:        inner.Body,
			DefRange:    inner.DefRange,
			TypeRange:   blk.TypeRange,
			LabelRanges: []hcl.Range{inner.TypeRange},
		}
		diags = append(diags, l.decodeResource(res, ManagedResource)...)
	}
	return diags
}

func (l *loader) decodeBlock(blk *hcl.Block) hcl.Diagnostics {
	switch blk.Type {
	case "variable":
		return l.decodeVariable(blk)
	case "locals":
		return l.decodeLocals(blk)
	case "provider":
		return l.decodeProvider(blk)
	case "output":
		return l.decodeOutput(blk)
	case "data":
		return l.decodeResource(blk, DataResource)
	}
	return nil
}

// checkName reports a label that is not a valid identifier.
func checkName(blk *hcl.Block, idx int, what string) hcl.Diagnostics {
	if hclsyntax.ValidIdentifier(blk.Labels[idx]) {
		return nil
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Invalid %s name", what),
		Detail:   fmt.Sprintf("%q is not a valid %s name: a name must start with a letter or underscore and may contain only letters, digits, underscores, and dashes.", blk.Labels[idx], what),
		Subject:  blk.LabelRanges[idx].Ptr(),
	}}
}

func duplicate(summary, what string, prev hcl.Range, rng hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf("%s was already declared at %s. Each must be declared only once in a configuration.", what, RangeString(prev)),
		Subject:  rng.Ptr(),
	}
}

// RangeString formats a range's start as FILE:LINE:COLUMN.
func RangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

func (l *loader) decodePondSettings(blk *hcl.Block) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if prev := l.cfg.Pond; prev != nil {
		return hcl.Diagnostics{duplicate("Duplicate pond block", "A pond block", prev.DeclRange, blk.DefRange)}
	}
	p := &Pond{DeclRange: blk.DefRange}
	l.cfg.Pond = p
	content, d := blk.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "backend", LabelNames: []string{"type"}},
		{Type: "sea"},
	}})
	diags = append(diags, d...)
	for _, b := range content.Blocks {
		switch b.Type {
		case "backend":
			if p.Backend != nil {
				diags = append(diags, duplicate("Duplicate backend block", "A backend block", p.Backend.DeclRange, b.DefRange))
				continue
			}
			if d := checkName(b, 0, "backend type"); d.HasErrors() {
				diags = append(diags, d...)
				continue
			}
			p.Backend = &Backend{Type: b.Labels[0], Config: b.Body, DeclRange: b.DefRange}
		case "sea":
			if p.Sea != nil {
				diags = append(diags, duplicate("Duplicate sea block", "A sea block", p.Sea.DeclRange, b.DefRange))
				continue
			}
			s := &Sea{DeclRange: b.DefRange}
			p.Sea = s
			sc, d := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "address", Required: true}}})
			diags = append(diags, d...)
			if a := sc.Attributes["address"]; a != nil {
				s.Address, d = constString(a.Expr, "address")
				s.AddressRange = a.Expr.Range()
				diags = append(diags, d...)
			}
		}
	}
	return diags
}

// constString evaluates an expression that must be a constant string.
func constString(expr hcl.Expression, what string) (string, hcl.Diagnostics) {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		return "", diags
	}
	v, err := convert.Convert(v, cty.String)
	if err != nil || v.IsNull() || !v.IsKnown() {
		return "", hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("Inappropriate value for attribute %q: a string is required.", what),
			Subject:  expr.Range().Ptr(),
		}}
	}
	return v.AsString(), nil
}

// constBool evaluates an expression that must be a literal bool.
func constBool(expr hcl.Expression, what string) (bool, hcl.Diagnostics) {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		return false, diags
	}
	v, err := convert.Convert(v, cty.Bool)
	if err != nil || v.IsNull() || !v.IsKnown() {
		return false, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("Inappropriate value for attribute %q: a bool is required.", what),
			Subject:  expr.Range().Ptr(),
		}}
	}
	return v.True(), nil
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "description"},
		{Name: "default"},
		{Name: "type"},
		{Name: "sensitive"},
		{Name: "nullable"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "validation"}},
}

var validationSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "condition", Required: true},
	{Name: "error_message", Required: true},
}}

func (l *loader) decodeVariable(blk *hcl.Block) hcl.Diagnostics {
	diags := checkName(blk, 0, "variable")
	if diags.HasErrors() {
		return diags
	}
	name := blk.Labels[0]
	if prev := l.cfg.Variables[name]; prev != nil {
		return hcl.Diagnostics{duplicate("Duplicate variable declaration", fmt.Sprintf("A variable named %q", name), prev.DeclRange, blk.DefRange)}
	}
	v := &Variable{Name: name, Type: cty.DynamicPseudoType, Nullable: true, DeclRange: blk.DefRange}
	l.cfg.Variables[name] = v
	content, d := blk.Body.Content(variableSchema)
	diags = append(diags, d...)
	if a := content.Attributes["description"]; a != nil {
		v.Description, d = constString(a.Expr, "description")
		diags = append(diags, d...)
	}
	if a := content.Attributes["sensitive"]; a != nil {
		v.Sensitive, d = constBool(a.Expr, "sensitive")
		diags = append(diags, d...)
	}
	if a := content.Attributes["nullable"]; a != nil {
		v.Nullable, d = constBool(a.Expr, "nullable")
		diags = append(diags, d...)
	}
	typeOK := true
	if a := content.Attributes["type"]; a != nil {
		v.TypeRange = a.Expr.Range()
		ty, defaults, d := variableType(a.Expr)
		diags = append(diags, d...)
		if d.HasErrors() {
			typeOK = false
		} else {
			v.Type, v.TypeDefaults = ty, defaults
		}
	}
	if a := content.Attributes["default"]; a != nil {
		val, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		if !d.HasErrors() && typeOK {
			conv, err := v.ConvertValue(val)
			switch {
			case err != nil:
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid default value for variable",
					Detail:   fmt.Sprintf("This default value is not compatible with the variable's type constraint: %s.", FormatCtyError(err)),
					Subject:  a.Expr.Range().Ptr(),
				})
			case conv.IsNull() && !v.Nullable:
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid default value for variable",
					Detail:   "A null default value is not valid when nullable = false.",
					Subject:  a.Expr.Range().Ptr(),
				})
			default:
				v.Default = conv
				v.DefaultRange = a.Expr.Range()
			}
		}
	}
	for _, b := range content.Blocks {
		vc, d := b.Body.Content(validationSchema)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		v.Validations = append(v.Validations, &Validation{
			Condition:    vc.Attributes["condition"].Expr,
			ErrorMessage: vc.Attributes["error_message"].Expr,
			DeclRange:    b.DefRange,
		})
	}
	return diags
}

// variableType decodes a type constraint, accepting as Terraform does the
// bare keywords list, map and set for collections of any one element type.
func variableType(expr hcl.Expression) (cty.Type, *typeexpr.Defaults, hcl.Diagnostics) {
	switch hcl.ExprAsKeyword(expr) {
	case "list":
		return cty.List(cty.DynamicPseudoType), nil, nil
	case "map":
		return cty.Map(cty.DynamicPseudoType), nil, nil
	case "set":
		return cty.Set(cty.DynamicPseudoType), nil, nil
	}
	return typeexpr.TypeConstraintWithDefaults(expr)
}

// ConvertValue applies the variable's optional-attribute defaults to a
// value and converts it to the variable's type constraint.
func (v *Variable) ConvertValue(val cty.Value) (cty.Value, error) {
	if v.TypeDefaults != nil && !val.IsNull() {
		val = v.TypeDefaults.Apply(val)
	}
	ty := v.Type
	if ty == cty.NilType {
		ty = cty.DynamicPseudoType
	}
	return convert.Convert(val, ty)
}

// FormatCtyError renders a conversion error with the attribute path it
// concerns, if any.
func FormatCtyError(err error) string {
	var pe cty.PathError
	if e, ok := err.(cty.PathError); ok {
		pe = e
	} else {
		return err.Error()
	}
	if len(pe.Path) == 0 {
		return pe.Error()
	}
	var b strings.Builder
	for _, step := range pe.Path {
		switch s := step.(type) {
		case cty.GetAttrStep:
			b.WriteString("." + s.Name)
		case cty.IndexStep:
			switch s.Key.Type() {
			case cty.String:
				fmt.Fprintf(&b, "[%q]", s.Key.AsString())
			case cty.Number:
				fmt.Fprintf(&b, "[%s]", s.Key.AsBigFloat().Text('f', -1))
			}
		}
	}
	return fmt.Sprintf("attribute %q: %s", strings.TrimPrefix(b.String(), "."), pe.Error())
}

func (l *loader) decodeLocals(blk *hcl.Block) hcl.Diagnostics {
	attrs, diags := blk.Body.JustAttributes()
	list := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Range.Start.Byte < list[j].Range.Start.Byte })
	for _, a := range list {
		if !hclsyntax.ValidIdentifier(a.Name) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid local value name",
				Detail:   fmt.Sprintf("%q is not a valid local value name: a name must start with a letter or underscore and may contain only letters, digits, underscores, and dashes.", a.Name),
				Subject:  a.NameRange.Ptr(),
			})
			continue
		}
		if prev := l.cfg.Locals[a.Name]; prev != nil {
			diags = append(diags, duplicate("Duplicate local value definition", fmt.Sprintf("A local value named %q", a.Name), prev.DeclRange, a.NameRange))
			continue
		}
		l.cfg.Locals[a.Name] = &Local{Name: a.Name, Expr: a.Expr, DeclRange: a.Range}
	}
	return diags
}

func (l *loader) decodeProvider(blk *hcl.Block) hcl.Diagnostics {
	diags := checkName(blk, 0, "provider")
	if diags.HasErrors() {
		return diags
	}
	content, remain, d := blk.Body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "alias"}}})
	diags = append(diags, d...)
	p := &Provider{Name: blk.Labels[0], Config: remain, DeclRange: blk.DefRange}
	if a := content.Attributes["alias"]; a != nil {
		alias, d := constString(a.Expr, "alias")
		diags = append(diags, d...)
		if !d.HasErrors() && !hclsyntax.ValidIdentifier(alias) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid provider alias",
				Detail:   fmt.Sprintf("%q is not a valid alias: an alias must start with a letter or underscore and may contain only letters, digits, underscores, and dashes.", alias),
				Subject:  a.Expr.Range().Ptr(),
			})
		}
		p.Alias = alias
	}
	if prev := l.cfg.Providers[p.Key()]; prev != nil {
		what := fmt.Sprintf("A default configuration for provider %q", p.Name)
		if p.Alias != "" {
			what = fmt.Sprintf("A configuration for provider %q with alias %q", p.Name, p.Alias)
		}
		return append(diags, duplicate("Duplicate provider configuration", what, prev.DeclRange, blk.DefRange))
	}
	l.cfg.Providers[p.Key()] = p
	return diags
}

var outputSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "value", Required: true},
	{Name: "description"},
	{Name: "sensitive"},
	{Name: "depends_on"},
}}

func (l *loader) decodeOutput(blk *hcl.Block) hcl.Diagnostics {
	diags := checkName(blk, 0, "output")
	if diags.HasErrors() {
		return diags
	}
	name := blk.Labels[0]
	if prev := l.cfg.Outputs[name]; prev != nil {
		return hcl.Diagnostics{duplicate("Duplicate output definition", fmt.Sprintf("An output named %q", name), prev.DeclRange, blk.DefRange)}
	}
	o := &Output{Name: name, DeclRange: blk.DefRange}
	l.cfg.Outputs[name] = o
	content, d := blk.Body.Content(outputSchema)
	diags = append(diags, d...)
	if a := content.Attributes["value"]; a != nil {
		o.Expr = a.Expr
	}
	if a := content.Attributes["description"]; a != nil {
		o.Description, d = constString(a.Expr, "description")
		diags = append(diags, d...)
	}
	if a := content.Attributes["sensitive"]; a != nil {
		o.Sensitive, d = constBool(a.Expr, "sensitive")
		diags = append(diags, d...)
	}
	if a := content.Attributes["depends_on"]; a != nil {
		o.DependsOn, d = decodeDependsOn(a.Expr)
		diags = append(diags, d...)
	}
	return diags
}

// MetaArguments are the argument names a resource block reserves for
// itself; they are removed from Resource.Config.
var MetaArguments = []string{"count", "for_each", "depends_on", "provider"}

var resourceSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "count"},
		{Name: "for_each"},
		{Name: "depends_on"},
		{Name: "provider"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "lifecycle"}},
}

var lifecycleSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "prevent_destroy"},
	{Name: "create_before_destroy"},
	{Name: "ignore_changes"},
}}

func (l *loader) decodeResource(blk *hcl.Block, mode Mode) hcl.Diagnostics {
	r, diags := l.resourceHeader(blk, mode)
	if diags.HasErrors() {
		return diags
	}
	if prev := l.cfg.Resources[r.Addr()]; prev != nil {
		what := fmt.Sprintf("A %s resource named %q", r.Type, r.Name)
		if mode == DataResource {
			what = fmt.Sprintf("A %s data source named %q", r.Type, r.Name)
		}
		return hcl.Diagnostics{duplicate(fmt.Sprintf("Duplicate %s configuration", r.Addr()), what, prev.DeclRange, blk.DefRange)}
	}
	l.cfg.Resources[r.Addr()] = r
	content, remain, d := blk.Body.PartialContent(resourceSchema)
	diags = append(diags, d...)
	r.Config = remain
	diags = append(diags, decodeMetaArguments(r, content.Attributes)...)
	diags = append(diags, decodeLifecycleBlocks(r, content.Blocks)...)
	return diags
}

// resourceHeader makes the resource of a block from its type and labels.
func (l *loader) resourceHeader(blk *hcl.Block, mode Mode) (*Resource, hcl.Diagnostics) {
	r := &Resource{Mode: mode, Type: blk.Type, DeclRange: blk.DefRange, TypeRange: blk.TypeRange}
	if mode != DataResource {
		r.Name = blk.Labels[0]
		return r, checkName(blk, 0, "resource")
	}
	r.Type, r.TypeRange = blk.Labels[0], blk.LabelRanges[0]
	if !l.data[r.Type] {
		detail := fmt.Sprintf("There is no data source of type %q.", r.Type)
		if s := nameSuggestion(r.Type, l.opts.data()); s != "" {
			detail += fmt.Sprintf(" Did you mean %q?", s)
		} else {
			detail += " Known data sources: " + strings.Join(l.opts.data(), ", ") + "."
		}
		return r, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Unsupported data source type",
			Detail:   detail,
			Subject:  blk.LabelRanges[0].Ptr(),
		}}
	}
	r.Name = blk.Labels[1]
	return r, checkName(blk, 1, "data source")
}

// decodeMetaArguments reads count, for_each, depends_on and provider.
func decodeMetaArguments(r *Resource, attrs hcl.Attributes) hcl.Diagnostics {
	var diags, d hcl.Diagnostics
	if a := attrs["count"]; a != nil {
		r.Count = a.Expr
	}
	if a := attrs["for_each"]; a != nil {
		r.ForEach = a.Expr
		if r.Count != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  `Invalid combination of "count" and "for_each"`,
				Detail:   `The "count" and "for_each" meta-arguments are mutually-exclusive: only one may be used in a block.`,
				Subject:  a.NameRange.Ptr(),
			})
		}
	}
	if a := attrs["depends_on"]; a != nil {
		r.DependsOn, d = decodeDependsOn(a.Expr)
		diags = append(diags, d...)
	}
	if a := attrs["provider"]; a != nil {
		r.ProviderRef, d = decodeProviderRef(a.Expr)
		diags = append(diags, d...)
	}
	return diags
}

// decodeLifecycleBlocks reads a resource's lifecycle block: at most one,
// and none in a data source.
func decodeLifecycleBlocks(r *Resource, blocks hcl.Blocks) hcl.Diagnostics {
	var diags hcl.Diagnostics
	seen := false
	for _, b := range blocks {
		if r.Mode == DataResource {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unsupported lifecycle block",
				Detail:   "Data sources have no lifecycle settings, so a lifecycle block is not allowed here.",
				Subject:  b.DefRange.Ptr(),
			})
			continue
		}
		if seen {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate lifecycle block",
				Detail:   "This resource already has a lifecycle block; merge their arguments into one.",
				Subject:  b.DefRange.Ptr(),
			})
			continue
		}
		seen = true
		diags = append(diags, decodeLifecycle(b.Body, &r.Lifecycle)...)
	}
	return diags
}

func decodeLifecycle(body hcl.Body, lc *Lifecycle) hcl.Diagnostics {
	content, diags := body.Content(lifecycleSchema)
	var d hcl.Diagnostics
	if a := content.Attributes["prevent_destroy"]; a != nil {
		lc.PreventDestroy, d = constBool(a.Expr, "prevent_destroy")
		diags = append(diags, d...)
	}
	if a := content.Attributes["create_before_destroy"]; a != nil {
		lc.CreateBeforeDestroy, d = constBool(a.Expr, "create_before_destroy")
		diags = append(diags, d...)
	}
	a := content.Attributes["ignore_changes"]
	if a == nil {
		return diags
	}
	if hcl.ExprAsKeyword(a.Expr) == "all" {
		lc.IgnoreAllChanges = true
		return diags
	}
	exprs, d := hcl.ExprList(a.Expr)
	if d.HasErrors() {
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid ignore_changes",
			Detail:   `The ignore_changes argument must be the keyword all or a list of attribute names, such as [nodes, config["X"]].`,
			Subject:  a.Expr.Range().Ptr(),
		})
	}
	for _, e := range exprs {
		tr, d := hcl.RelTraversalForExpr(e)
		if d.HasErrors() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid ignore_changes",
				Detail:   `Each ignore_changes element must be an attribute name of this resource, optionally followed by attribute or index steps, such as nodes or config["X"].`,
				Subject:  e.Range().Ptr(),
			})
			continue
		}
		lc.IgnoreChanges = append(lc.IgnoreChanges, tr)
	}
	return diags
}

func decodeDependsOn(expr hcl.Expression) ([]hcl.Traversal, hcl.Diagnostics) {
	exprs, diags := hcl.ExprList(expr)
	if diags.HasErrors() {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid depends_on",
			Detail:   "The depends_on argument must be a list of references to resources or data sources, such as [pool.campus].",
			Subject:  expr.Range().Ptr(),
		}}
	}
	var out []hcl.Traversal
	for _, e := range exprs {
		tr, d := hcl.AbsTraversalForExpr(e)
		if d.HasErrors() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid depends_on reference",
				Detail:   "Each depends_on element must be a direct reference to a resource or data source, such as pool.campus or data.sea_query.big, with no operators or function calls.",
				Subject:  e.Range().Ptr(),
			})
			continue
		}
		ref, d := ParseRef(tr)
		if d.HasErrors() {
			diags = append(diags, d...)
			continue
		}
		if ref.Kind != RefResource && ref.Kind != RefData {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid depends_on reference",
				Detail:   fmt.Sprintf("%s is not a resource or data source; depends_on may only list resources and data sources.", ref.Subject()),
				Subject:  e.Range().Ptr(),
			})
			continue
		}
		out = append(out, tr)
	}
	return out, diags
}

func decodeProviderRef(expr hcl.Expression) (*ProviderRef, hcl.Diagnostics) {
	bad := hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Invalid provider reference",
		Detail:   "The provider argument must be a reference of the form provider.NAME or provider.NAME.ALIAS, such as provider.local.",
		Subject:  expr.Range().Ptr(),
	}}
	tr, d := hcl.AbsTraversalForExpr(expr)
	if d.HasErrors() || len(tr) < 2 || len(tr) > 3 || tr.RootName() != "provider" {
		return nil, bad
	}
	var names []string
	for _, step := range tr[1:] {
		a, ok := step.(hcl.TraverseAttr)
		if !ok {
			return nil, bad
		}
		names = append(names, a.Name)
	}
	ref := &ProviderRef{Name: names[0], Range: tr.SourceRange()}
	if len(names) == 2 {
		ref.Alias = names[1]
	}
	return ref, nil
}

// nameSuggestion returns the candidate closest to given, or "" when none
// is close enough to be a likely typo.
func nameSuggestion(given string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range slices.Sorted(slices.Values(candidates)) {
		if d := levenshtein.Distance(given, c, nil); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}
