package funcs

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/pond-htc/pond/planner/internal/hclnest"
)

// resolvePath expands a leading ~ and makes a relative path relative to
// baseDir.
func resolvePath(baseDir, path string) (string, error) {
	p, err := expandHome(path)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(baseDir, p)
	}
	return filepath.Clean(p), nil
}

func expandHome(path string) (string, error) {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expanding ~: %w", err)
	}
	return filepath.Join(home, path[1:]), nil
}

// MakeFileFunc returns Terraform's file (the contents of a UTF-8 text file)
// or, with asBase64, filebase64 (the contents of any file, Base64-encoded).
// Relative paths are resolved against baseDir.
func MakeFileFunc(baseDir string, asBase64 bool) function.Function {
	return fileStringFunc(baseDir, "Reads the contents of a file.", func(path string, src []byte) (cty.Value, error) {
		if asBase64 {
			return cty.StringVal(base64.StdEncoding.EncodeToString(src)), nil
		}
		if !utf8.Valid(src) {
			return cty.NilVal, function.NewArgErrorf(0, "contents of %s are not valid UTF-8; use the filebase64 function to obtain the Base64 encoded contents", path)
		}
		return cty.StringVal(string(src)), nil
	})
}

// makeFileHashFunc returns filemd5, filesha256 and the like: the
// hexadecimal digest of a file's contents.
func makeFileHashFunc(baseDir string, h func() hash.Hash) function.Function {
	return fileStringFunc(baseDir, "Returns the hexadecimal digest of a file's contents.", func(_ string, src []byte) (cty.Value, error) {
		d := h()
		d.Write(src)
		return cty.StringVal(hex.EncodeToString(d.Sum(nil))), nil
	})
}

// fileStringFunc returns a function of a path (relative paths against
// baseDir) to a string: conv makes it from the path as given and the
// file's contents.
func fileStringFunc(baseDir, description string, conv func(path string, src []byte) (cty.Value, error)) function.Function {
	return function.New(&function.Spec{
		Description: description,
		Params:      []function.Parameter{{Name: "path", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			path := args[0].AsString()
			src, err := readFile(baseDir, path)
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			return conv(path, src)
		},
	})
}

func readFile(baseDir, path string) ([]byte, error) {
	p, err := resolvePath(baseDir, path)
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no file exists at %s", p)
	case err != nil:
		return nil, fmt.Errorf("failed to read %s: %w", p, err)
	}
	return src, nil
}

// MakeFileExistsFunc returns Terraform's fileexists: whether a regular
// file exists at a path (relative paths against baseDir). A directory is
// an error.
func MakeFileExistsFunc(baseDir string) function.Function {
	return function.New(&function.Spec{
		Description: "Reports whether a file exists at the given path.",
		Params:      []function.Parameter{{Name: "path", Type: cty.String}},
		Type:        function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, err := resolvePath(baseDir, args[0].AsString())
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			st, err := os.Stat(p)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return cty.False, nil
			case err != nil:
				return cty.NilVal, function.NewArgErrorf(0, "failed to stat %s: %s", p, err)
			case st.IsDir():
				return cty.NilVal, function.NewArgErrorf(0, "%s is a directory, not a file", p)
			}
			return cty.True, nil
		},
	})
}

// MakeTemplateFileFunc returns Terraform's templatefile: it renders the file
// at a path (relative to baseDir) as an HCL template whose only variables
// are the keys of the given object or map, with the functions returned by
// funcs.
func MakeTemplateFileFunc(baseDir string, funcs func() map[string]function.Function) function.Function {
	return function.New(&function.Spec{
		Description: "Renders a template file with the given variables.",
		Params: []function.Parameter{
			{Name: "path", Type: cty.String},
			{Name: "vars", Type: cty.DynamicPseudoType},
		},
		Type: function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			path := args[0].AsString()
			src, err := readFile(baseDir, path)
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			vars := args[1]
			if !(vars.Type().IsObjectType() || vars.Type().IsMapType()) || vars.IsNull() {
				return cty.NilVal, function.NewArgErrorf(1, "vars must be an object or a map")
			}
			if !vars.IsWhollyKnown() {
				return cty.UnknownVal(cty.String), nil
			}
			ctxVars := map[string]cty.Value{}
			for it := vars.ElementIterator(); it.Next(); {
				k, v := it.Element()
				name := k.AsString()
				if !hclsyntax.ValidIdentifier(name) {
					return cty.NilVal, function.NewArgErrorf(1, "invalid template variable name %q: must start with a letter, followed by zero or more letters, digits, and underscores", name)
				}
				ctxVars[name] = v
			}
			tokens, _ := hclsyntax.LexTemplate(src, path, hcl.InitialPos)
			if t := hclnest.TooDeep(tokens); t != nil {
				return cty.NilVal, function.NewArgErrorf(0, "template %s:%d,%d: nested more than %d levels deep (interpolations, directives, brackets, braces, parentheses and unary operators count)",
					path, t.Range.Start.Line, t.Range.Start.Column, hclnest.Max)
			}
			expr, diags := hclsyntax.ParseTemplate(src, path, hcl.InitialPos)
			if diags.HasErrors() {
				return cty.NilVal, function.NewArgErrorf(0, "template %s: %s", path, diags.Error())
			}
			for _, tr := range expr.Variables() {
				if _, ok := ctxVars[tr.RootName()]; !ok {
					rng := tr.SourceRange()
					return cty.NilVal, function.NewArgErrorf(1, "vars map does not contain key %q, referenced at %s:%d,%d", tr.RootName(), path, rng.Start.Line, rng.Start.Column)
				}
			}
			val, diags := expr.Value(&hcl.EvalContext{Variables: ctxVars, Functions: funcs()})
			if diags.HasErrors() {
				return cty.NilVal, function.NewArgErrorf(0, "rendering %s: %s", path, diags.Error())
			}
			val, err = convert.Convert(val, cty.String)
			if err != nil || val.IsNull() {
				return cty.NilVal, function.NewArgErrorf(0, "template %s did not produce a string", path)
			}
			return val, nil
		},
	})
}

// recursiveTemplateFunc stands in for templatefile inside templates.
var recursiveTemplateFunc = function.New(&function.Spec{
	Params: []function.Parameter{
		{Name: "path", Type: cty.String},
		{Name: "vars", Type: cty.DynamicPseudoType},
	},
	Type: func([]cty.Value) (cty.Type, error) {
		return cty.NilType, fmt.Errorf("cannot recursively call templatefile from inside a templatefile call")
	},
	Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
		return cty.NilVal, fmt.Errorf("cannot recursively call templatefile from inside a templatefile call")
	},
})

func pathFunc(desc string, f func(string) (string, error)) function.Function {
	return function.New(&function.Spec{
		Description: desc,
		Params:      []function.Parameter{{Name: "path", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			s, err := f(args[0].AsString())
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			return cty.StringVal(s), nil
		},
	})
}

// AbsPathFunc is Terraform's abspath: an absolute path, resolved against
// the current working directory, with forward slashes.
var AbsPathFunc = pathFunc("Converts a path to an absolute path.", func(p string) (string, error) {
	abs, err := filepath.Abs(p)
	return filepath.ToSlash(abs), err
})

// BasenameFunc is Terraform's basename: the last element of a path.
var BasenameFunc = pathFunc("Returns the last element of a path.", func(p string) (string, error) {
	return filepath.Base(p), nil
})

// DirnameFunc is Terraform's dirname: all but the last element of a path.
var DirnameFunc = pathFunc("Returns all but the last element of a path.", func(p string) (string, error) {
	return filepath.Dir(p), nil
})

// PathExpandFunc is Terraform's pathexpand: a leading ~ becomes the home
// directory.
var PathExpandFunc = pathFunc("Replaces a leading ~ in a path with the home directory.", expandHome)
