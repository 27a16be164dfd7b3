package config

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/pond-htc/pond/planner/funcs"
	"github.com/pond-htc/pond/planner/marks"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Variable value files and environment.
const (
	// EnvVarPrefix prefixes environment variables that set input
	// variables: POND_VAR_workers=8.
	EnvVarPrefix = "POND_VAR_"
	// VarsSuffix and VarsJSONSuffix end variable files.
	VarsSuffix     = ".pondvars"
	VarsJSONSuffix = ".pondvars.json"
	// DefaultVarsFile is loaded, when present, before the *.auto.pondvars
	// files (as is its .json form).
	DefaultVarsFile = "pond.pondvars"
)

// VarArg is one -var or -var-file command-line flag. Exactly one field is
// set.
type VarArg struct {
	// File is the path given to -var-file.
	File string
	// Assignment is the NAME=VALUE text given to -var.
	Assignment string
}

// VarOptions says where CollectVariables finds values besides defaults and
// the configuration directory's variable files.
type VarOptions struct {
	// Environ is the environment as KEY=VALUE strings; nil means
	// os.Environ().
	Environ []string
	// Args are the -var and -var-file flags in command-line order.
	Args []VarArg
	// Input allows Prompt to be called for required variables that have no
	// value.
	Input bool
	// Prompt asks the user for a variable's value; its answer is read like
	// a -var value.
	Prompt func(name, description string) (string, error)
}

// varValue is a value and where it came from.
type varValue struct {
	val cty.Value
	// rng is the source range in a file, or nil for the command line and
	// environment.
	rng *hcl.Range
	// from describes the source for messages.
	from string
}

// CollectVariables determines the value of every declared input variable,
// with Terraform's precedence (later wins): the default; the environment
// variable POND_VAR_name; pond.pondvars, pond.pondvars.json, then
// *.auto.pondvars and *.auto.pondvars.json of the configuration directory in
// lexical order; then -var-file and -var flags in command-line order.
//
// A -var, environment or prompted value is taken literally for a variable
// of primitive type or without a type argument, and parsed as an HCL
// expression otherwise (type = any included). Values are converted to the declared type, null is refused
// for nullable = false variables (which then take their default), and the
// validation rules run with the configuration's functions. Setting an
// undeclared variable is an error on the command line and a warning in a
// file. Parsed variable files are added to cfg.Files so that diagnostics can
// show their source.
//
// The result has an entry for every declared variable; one whose value was
// in error is cty.DynamicVal.
func CollectVariables(cfg *Config, opts VarOptions) (map[string]cty.Value, hcl.Diagnostics) {
	values := map[string]*varValue{}
	for name, v := range cfg.Variables {
		if v.Default != cty.NilVal {
			rng := v.DefaultRange
			values[name] = &varValue{val: v.Default, rng: &rng, from: "its default"}
		}
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	diags := envValues(cfg, environ, values)
	dir := cfg.Dir
	if dir == "" {
		dir = "."
	}
	for _, f := range varsFiles(dir) {
		diags = append(diags, loadVarsFile(cfg, f, values)...)
	}
	diags = append(diags, argValues(cfg, opts.Args, values)...)

	result := map[string]cty.Value{}
	failed := map[string]bool{}
	for _, name := range sortedKeys(cfg.Variables) {
		val, d := finalValue(name, cfg.Variables[name], values[name], opts)
		diags = append(diags, d...)
		if d.HasErrors() {
			failed[name] = true
			val = cty.DynamicVal
		}
		result[name] = val
	}
	diags = append(diags, runValidations(cfg, dir, result, failed, values)...)
	return result, diags
}

// envValues records in values the variables set by POND_VAR_name
// environment variables.
func envValues(cfg *Config, environ []string, values map[string]*varValue) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, kv := range environ {
		key, raw, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(key, EnvVarPrefix) {
			continue
		}
		name := strings.TrimPrefix(key, EnvVarPrefix)
		v := cfg.Variables[name]
		if v == nil {
			continue
		}
		from := "the environment variable " + key
		val, d := parseRawValue(v, raw, from)
		diags = append(diags, d...)
		if !d.HasErrors() {
			values[name] = &varValue{val: val, from: from}
		}
	}
	return diags
}

// varsFiles returns the variable files of the configuration directory that
// are read without being named: the default file, then the *.auto ones in
// name order.
func varsFiles(dir string) []string {
	var files []string
	for _, name := range []string{DefaultVarsFile, strings.TrimSuffix(DefaultVarsFile, VarsSuffix) + VarsJSONSuffix} {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && !st.IsDir() {
			files = append(files, filepath.Join(dir, name))
		}
	}
	if entries, err := os.ReadDir(dir); err == nil {
		var auto []string
		for _, e := range entries {
			n := e.Name()
			if !e.IsDir() && (strings.HasSuffix(n, ".auto"+VarsSuffix) || strings.HasSuffix(n, ".auto"+VarsJSONSuffix)) {
				auto = append(auto, n)
			}
		}
		sort.Strings(auto)
		for _, n := range auto {
			files = append(files, filepath.Join(dir, n))
		}
	}
	return files
}

// argValues records in values the variables set by -var and -var-file, in
// command-line order.
func argValues(cfg *Config, args []VarArg, values map[string]*varValue) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, arg := range args {
		if arg.File != "" {
			diags = append(diags, loadVarsFile(cfg, arg.File, values)...)
			continue
		}
		name, raw, ok := strings.Cut(arg.Assignment, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid -var option",
				Detail:   fmt.Sprintf("The given -var option %q is not correctly specified. It must be a variable name and value separated by an equals sign, like -var=\"key=value\".", arg.Assignment),
			})
			continue
		}
		v := cfg.Variables[name]
		if v == nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail:   fmt.Sprintf("The argument -var=%q assigns a variable named %q, but the configuration does not declare a variable of that name. To use this value, add a variable %q {} block to the configuration.", arg.Assignment, name, name),
			})
			continue
		}
		from := fmt.Sprintf("the argument -var=%q", arg.Assignment)
		val, d := parseRawValue(v, raw, from)
		diags = append(diags, d...)
		if !d.HasErrors() {
			values[name] = &varValue{val: val, from: from}
		}
	}
	return diags
}

// finalValue is variable name's value: the one given (vv, nil when none),
// or one asked for, converted to the variable's type and checked for null.
func finalValue(name string, v *Variable, vv *varValue, opts VarOptions) (cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if vv == nil && opts.Input && opts.Prompt != nil {
		raw, err := opts.Prompt(name, v.Description)
		if err != nil {
			return cty.DynamicVal, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Failed to read variable value",
				Detail:   fmt.Sprintf("Reading a value for var.%s failed: %s.", name, err),
				Subject:  v.DeclRange.Ptr(),
			}}
		}
		from := "the value entered for var." + name
		val, d := parseRawValue(v, raw, from)
		diags = append(diags, d...)
		if !d.HasErrors() {
			vv = &varValue{val: val, from: from}
		}
	}
	if vv == nil {
		return cty.DynamicVal, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No value for required variable",
			Detail:   fmt.Sprintf("The input variable %q is not set and has no default value. Use a -var or -var-file command line argument, a *.auto.pondvars file, or the environment variable %s%s to provide a value for this variable.", name, EnvVarPrefix, name),
			Subject:  v.DeclRange.Ptr(),
		})
	}
	val, err := v.ConvertValue(vv.val)
	if err != nil {
		return cty.DynamicVal, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for input variable",
			Detail:   fmt.Sprintf("The value from %s is not suitable for var.%s declared at %s: %s.", vv.from, name, RangeString(v.DeclRange), FormatCtyError(err)),
			Subject:  vv.rng,
		})
	}
	if val.IsNull() && !v.Nullable {
		if v.Default == cty.NilVal || v.Default.IsNull() {
			return cty.DynamicVal, append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Required variable not set",
				Detail:   fmt.Sprintf("The value from %s for var.%s is null, but the variable is declared with nullable = false.", vv.from, name),
				Subject:  vv.rng,
			})
		}
		val = v.Default
	}
	return val, diags
}

// runValidations runs the validation blocks of every variable whose value
// is known to be good, replacing the values that fail by unknowns.
func runValidations(cfg *Config, dir string, result map[string]cty.Value, failed map[string]bool, values map[string]*varValue) hcl.Diagnostics {
	var diags hcl.Diagnostics
	// A sensitive variable's value is marked, so that a diagnostic shows
	// it as (sensitive value).
	vars := make(map[string]cty.Value, len(result))
	for name, v := range result {
		if d, ok := cfg.Variables[name]; ok && d.Sensitive {
			v = v.Mark(marks.Sensitive)
		}
		vars[name] = v
	}
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(vars)},
		Functions: funcs.Functions(dir),
	}
	for _, name := range sortedKeys(cfg.Variables) {
		if failed[name] {
			continue
		}
		v := cfg.Variables[name]
		for _, val := range v.Validations {
			d := runValidation(ctx, v, val, values[name])
			diags = append(diags, d...)
			if d.HasErrors() {
				result[name] = cty.DynamicVal
				break
			}
		}
	}
	return diags
}

func runValidation(ctx *hcl.EvalContext, v *Variable, val *Validation, vv *varValue) hcl.Diagnostics {
	result, diags := val.Condition.Value(ctx)
	if diags.HasErrors() {
		return diags
	}
	result, err := convert.Convert(result, cty.Bool)
	result, _ = result.UnmarkDeep()
	if err != nil || result.IsNull() || !result.IsKnown() {
		return hcl.Diagnostics{{
			Severity:    hcl.DiagError,
			Summary:     "Invalid validation result",
			Detail:      "The validation condition must produce true or false.",
			Subject:     val.Condition.Range().Ptr(),
			Expression:  val.Condition,
			EvalContext: ctx,
		}}
	}
	if result.True() {
		return nil
	}
	msg := "The value does not satisfy a validation rule."
	if m, d := val.ErrorMessage.Value(ctx); !d.HasErrors() {
		if s, err := convert.Convert(m, cty.String); err == nil && !s.IsNull() && s.IsKnown() && !s.IsMarked() {
			msg = strings.TrimSpace(s.AsString())
		}
	}
	subject := val.Condition.Range().Ptr()
	if vv != nil && vv.rng != nil {
		subject = vv.rng
	}
	from := "its default"
	if vv != nil {
		from = vv.from
	}
	return hcl.Diagnostics{{
		Severity:    hcl.DiagError,
		Summary:     "Invalid value for variable",
		Detail:      fmt.Sprintf("%s\n\nThe value of var.%s (from %s) was checked by the validation rule at %s.", msg, v.Name, from, RangeString(val.DeclRange)),
		Subject:     subject,
		Expression:  val.Condition,
		EvalContext: ctx,
	}}
}

// parseRawValue reads a -var, environment or prompted value as Terraform
// does: literally for a variable with no type argument or a primitive type
// (string, number, bool), as an HCL expression for the others (including
// any).
func parseRawValue(v *Variable, raw, from string) (cty.Value, hcl.Diagnostics) {
	if v.TypeRange.Filename == "" || v.Type.IsPrimitiveType() {
		return cty.StringVal(raw), nil
	}
	filename := fmt.Sprintf("<value for var.%s>", v.Name)
	diags := checkNesting([]byte(raw), filename, true)
	var expr hclsyntax.Expression
	if !diags.HasErrors() {
		expr, diags = hclsyntax.ParseExpression([]byte(raw), filename, hcl.InitialPos)
	}
	if !diags.HasErrors() {
		var val cty.Value
		val, diags = expr.Value(nil)
		if !diags.HasErrors() {
			return val, nil
		}
	}
	return cty.DynamicVal, hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Invalid value for input variable",
		Detail:   fmt.Sprintf("The value from %s for var.%s of type %s is not a valid expression: %s", from, v.Name, v.Type.FriendlyNameForConstraint(), diags.Error()),
	}}
}

// loadVarsFile reads a .pondvars (HCL) or .pondvars.json file into values.
func loadVarsFile(cfg *Config, path string, values map[string]*varValue) hcl.Diagnostics {
	src, err := os.ReadFile(path)
	if err != nil {
		detail := fmt.Sprintf("The variables file %s could not be read: %s.", path, err)
		if errors.Is(err, fs.ErrNotExist) {
			detail = fmt.Sprintf("The variables file %s does not exist.", path)
		}
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Failed to read variables file", Detail: detail}}
	}
	var (
		file  *hcl.File
		diags hcl.Diagnostics
	)
	if strings.HasSuffix(path, ".json") {
		file, diags = parseJSON(src, path)
	} else {
		if diags = checkNesting(src, path, false); !diags.HasErrors() {
			file, diags = hclsyntax.ParseConfig(src, path, hcl.InitialPos)
		}
	}
	if file != nil {
		cfg.Files[path] = file
	}
	if diags.HasErrors() || file == nil || file.Body == nil {
		return diags
	}
	attrs, d := file.Body.JustAttributes()
	diags = append(diags, d...)
	list := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Range.Start.Byte < list[j].Range.Start.Byte })
	for _, a := range list {
		if cfg.Variables[a.Name] == nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Value for undeclared variable",
				Detail:   fmt.Sprintf("The configuration does not declare a variable named %q but a value was found in %s. If you meant to use this value, add a variable %q {} block to the configuration.", a.Name, path, a.Name),
				Subject:  a.NameRange.Ptr(),
			})
			continue
		}
		val, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		rng := a.Expr.Range()
		values[a.Name] = &varValue{val: val, rng: &rng, from: path}
	}
	return diags
}

// varFlag implements flag.Value for -var and -var-file.
type varFlag struct {
	args *[]VarArg
	file bool
}

// VarFlag returns a flag.Value that appends each -var NAME=VALUE to args,
// keeping command-line order with VarFileFlag.
func VarFlag(args *[]VarArg) flag.Value {
	return &varFlag{args: args}
}

// VarFileFlag returns a flag.Value that appends each -var-file PATH to
// args, keeping command-line order with VarFlag.
func VarFileFlag(args *[]VarArg) flag.Value {
	return &varFlag{args: args, file: true}
}

func (f *varFlag) String() string { return "" }

func (f *varFlag) Set(s string) error {
	if f.file {
		if s == "" {
			return errors.New("empty -var-file path")
		}
		*f.args = append(*f.args, VarArg{File: s})
		return nil
	}
	if !strings.Contains(s, "=") {
		return fmt.Errorf("no \"=\" in %q: -var takes a variable name and its value separated by an equals sign, like -var 'NAME=VALUE'", s)
	}
	*f.args = append(*f.args, VarArg{Assignment: s})
	return nil
}
