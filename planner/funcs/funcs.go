// Package funcs provides the functions available in pond configuration
// expressions: Terraform's common built-in functions, built mostly on
// go-cty's standard library, plus file-system functions relative to the
// configuration directory.
package funcs

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner/marks"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// Functions returns the function table for expressions of a configuration
// whose directory is baseDir: relative paths given to file, fileexists,
// filebase64 and templatefile are resolved against it. Each call returns a
// new map that the caller may extend.
func Functions(baseDir string) map[string]function.Function {
	fs := map[string]function.Function{
		"abs":                    stdlib.AbsoluteFunc,
		"alltrue":                AllTrueFunc,
		"anytrue":                AnyTrueFunc,
		"base64decode":           Base64DecodeFunc,
		"base64encode":           Base64EncodeFunc,
		"base64sha256":           makeBase64HashFunc(sha256.New),
		"base64sha512":           makeBase64HashFunc(sha512.New),
		"can":                    tryfunc.CanFunc,
		"ceil":                   stdlib.CeilFunc,
		"chomp":                  stdlib.ChompFunc,
		"chunklist":              stdlib.ChunklistFunc,
		"coalesce":               CoalesceFunc,
		"coalescelist":           stdlib.CoalesceListFunc,
		"compact":                stdlib.CompactFunc,
		"concat":                 stdlib.ConcatFunc,
		"contains":               stdlib.ContainsFunc,
		"csvdecode":              stdlib.CSVDecodeFunc,
		"distinct":               stdlib.DistinctFunc,
		"element":                stdlib.ElementFunc,
		"endswith":               EndsWithFunc,
		"flatten":                stdlib.FlattenFunc,
		"floor":                  stdlib.FloorFunc,
		"format":                 stdlib.FormatFunc,
		"formatdate":             stdlib.FormatDateFunc,
		"formatlist":             stdlib.FormatListFunc,
		"indent":                 stdlib.IndentFunc,
		"index":                  IndexFunc,
		"join":                   stdlib.JoinFunc,
		"jsondecode":             stdlib.JSONDecodeFunc,
		"jsonencode":             stdlib.JSONEncodeFunc,
		"keys":                   stdlib.KeysFunc,
		"length":                 LengthFunc,
		"log":                    stdlib.LogFunc,
		"lookup":                 stdlib.LookupFunc,
		"lower":                  stdlib.LowerFunc,
		"max":                    stdlib.MaxFunc,
		"md5":                    makeHashFunc(md5.New),
		"merge":                  stdlib.MergeFunc,
		"min":                    stdlib.MinFunc,
		"nonsensitive":           NonsensitiveFunc,
		"one":                    OneFunc,
		"parseint":               stdlib.ParseIntFunc,
		"pow":                    stdlib.PowFunc,
		"range":                  stdlib.RangeFunc,
		"regex":                  stdlib.RegexFunc,
		"regexall":               stdlib.RegexAllFunc,
		"replace":                ReplaceFunc,
		"reverse":                stdlib.ReverseListFunc,
		"sensitive":              SensitiveFunc,
		"setintersection":        stdlib.SetIntersectionFunc,
		"setproduct":             stdlib.SetProductFunc,
		"setsubtract":            stdlib.SetSubtractFunc,
		"setsymmetricdifference": stdlib.SetSymmetricDifferenceFunc,
		"setunion":               stdlib.SetUnionFunc,
		"sha1":                   makeHashFunc(sha1.New),
		"sha256":                 makeHashFunc(sha256.New),
		"sha512":                 makeHashFunc(sha512.New),
		"signum":                 stdlib.SignumFunc,
		"slice":                  stdlib.SliceFunc,
		"sort":                   stdlib.SortFunc,
		"split":                  stdlib.SplitFunc,
		"startswith":             StartsWithFunc,
		"strcontains":            StrContainsFunc,
		"strrev":                 stdlib.ReverseFunc,
		"substr":                 stdlib.SubstrFunc,
		"sum":                    SumFunc,
		"timeadd":                stdlib.TimeAddFunc,
		"timestamp":              TimestampFunc,
		"title":                  stdlib.TitleFunc,
		"tobool":                 stdlib.MakeToFunc(cty.Bool),
		"tolist":                 stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":                  stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber":               stdlib.MakeToFunc(cty.Number),
		"toset":                  stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring":               stdlib.MakeToFunc(cty.String),
		"trim":                   stdlib.TrimFunc,
		"trimprefix":             stdlib.TrimPrefixFunc,
		"trimspace":              stdlib.TrimSpaceFunc,
		"trimsuffix":             stdlib.TrimSuffixFunc,
		"try":                    tryfunc.TryFunc,
		"upper":                  stdlib.UpperFunc,
		"urlencode":              URLEncodeFunc,
		"uuid":                   UUIDFunc,
		"values":                 stdlib.ValuesFunc,
		"zipmap":                 stdlib.ZipmapFunc,

		"abspath":    AbsPathFunc,
		"basename":   BasenameFunc,
		"dirname":    DirnameFunc,
		"pathexpand": PathExpandFunc,
		"file":       MakeFileFunc(baseDir, false),
		"filebase64": MakeFileFunc(baseDir, true),
		"fileexists": MakeFileExistsFunc(baseDir),
		"filemd5":    makeFileHashFunc(baseDir, md5.New),
		"filesha256": makeFileHashFunc(baseDir, sha256.New),
	}
	// templatefile renders with the same functions, except that it may not
	// call itself.
	inner := make(map[string]function.Function, len(fs)+1)
	for k, v := range fs {
		inner[k] = v
	}
	inner["templatefile"] = recursiveTemplateFunc
	fs["templatefile"] = MakeTemplateFileFunc(baseDir, func() map[string]function.Function { return inner })
	return fs
}

// LengthFunc is Terraform's length: the number of elements of a collection
// or structural value, or of characters of a string.
var LengthFunc = function.New(&function.Spec{
	Description: "Returns the number of elements of a collection or structure, or of characters of a string.",
	Params: []function.Parameter{{
		Name:             "value",
		Type:             cty.DynamicPseudoType,
		AllowDynamicType: true,
	}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		switch {
		case ty == cty.String, ty.IsCollectionType(), ty.IsTupleType(), ty.IsObjectType(), ty == cty.DynamicPseudoType:
			return cty.Number, nil
		}
		return cty.NilType, function.NewArgErrorf(0, "argument must be a string, a collection type, or a structural type")
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		switch {
		case v.IsNull():
			return cty.NilVal, function.NewArgErrorf(0, "argument must not be null")
		case v.Type() == cty.String:
			return stdlib.Strlen(v)
		case v.Type().IsObjectType():
			return cty.NumberIntVal(int64(len(v.Type().AttributeTypes()))), nil
		}
		return v.Length(), nil
	},
})

// CoalesceFunc is Terraform's coalesce: the first argument that is neither
// null nor an empty string, all converted to a common type.
var CoalesceFunc = function.New(&function.Spec{
	Description: "Returns the first argument that is not null or an empty string.",
	VarParam: &function.Parameter{
		Name:             "vals",
		Type:             cty.DynamicPseudoType,
		AllowNull:        true,
		AllowDynamicType: true,
		AllowUnknown:     true,
	},
	Type: func(args []cty.Value) (cty.Type, error) {
		types := make([]cty.Type, len(args))
		for i, a := range args {
			types[i] = a.Type()
		}
		ty, _ := convert.UnifyUnsafe(types)
		if ty == cty.NilType {
			return cty.NilType, fmt.Errorf("all arguments must have the same type")
		}
		return ty, nil
	},
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		for _, a := range args {
			v, err := convert.Convert(a, retType)
			if err != nil {
				return cty.NilVal, fmt.Errorf("all arguments must have the same type: %w", err)
			}
			if !v.IsKnown() {
				return cty.UnknownVal(retType), nil
			}
			if v.IsNull() || (v.Type() == cty.String && v.AsString() == "") {
				continue
			}
			return v, nil
		}
		return cty.NilVal, fmt.Errorf("no non-null, non-empty-string arguments")
	},
})

// IndexFunc is Terraform's index: the position of the first element of a
// list equal to a value.
var IndexFunc = function.New(&function.Spec{
	Description: "Returns the index of the first element of a list equal to the given value.",
	Params: []function.Parameter{
		{Name: "list", Type: cty.DynamicPseudoType},
		{Name: "value", Type: cty.DynamicPseudoType},
	},
	Type: function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		list := args[0]
		if !(list.Type().IsListType() || list.Type().IsTupleType()) {
			return cty.NilVal, function.NewArgErrorf(0, "argument must be a list or tuple")
		}
		if !list.IsKnown() || !args[1].IsKnown() {
			return cty.UnknownVal(cty.Number), nil
		}
		if list.LengthInt() == 0 {
			return cty.NilVal, function.NewArgErrorf(0, "cannot search an empty list")
		}
		for it := list.ElementIterator(); it.Next(); {
			i, v := it.Element()
			eq, err := stdlib.Equal(v, args[1])
			if err != nil {
				return cty.NilVal, err
			}
			if !eq.IsKnown() {
				return cty.UnknownVal(cty.Number), nil
			}
			if eq.True() {
				return i, nil
			}
		}
		return cty.NilVal, function.NewArgErrorf(1, "item not found")
	},
})

// SumFunc is Terraform's sum: the total of a list or set of numbers.
var SumFunc = function.New(&function.Spec{
	Description: "Returns the total of a list or set of numbers.",
	Params:      []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type:        function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		ty := v.Type()
		if !(ty.IsListType() || ty.IsSetType() || ty.IsTupleType()) {
			return cty.NilVal, function.NewArgErrorf(0, "argument must be a list, set, or tuple of numbers")
		}
		if !v.IsWhollyKnown() {
			return cty.UnknownVal(cty.Number), nil
		}
		if v.LengthInt() == 0 {
			return cty.NilVal, function.NewArgErrorf(0, "cannot sum an empty list")
		}
		total := cty.Zero
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			n, err := convert.Convert(e, cty.Number)
			if err != nil || n.IsNull() {
				return cty.NilVal, function.NewArgErrorf(0, "every element must be a number")
			}
			total = total.Add(n)
		}
		return total, nil
	},
})

// OneFunc is Terraform's one: the only element of a list, set or tuple of
// zero or one elements (null when empty).
var OneFunc = function.New(&function.Spec{
	Description: "Returns the only element of a collection with zero or one elements, or null when it is empty.",
	Params:      []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		switch {
		case ty.IsListType() || ty.IsSetType():
			return ty.ElementType(), nil
		case ty.IsTupleType():
			switch len(ty.TupleElementTypes()) {
			case 0:
				return cty.DynamicPseudoType, nil
			case 1:
				return ty.TupleElementType(0), nil
			}
			return cty.NilType, function.NewArgErrorf(0, "must be a list, set, or tuple value with either zero or one elements")
		case ty == cty.DynamicPseudoType:
			return cty.DynamicPseudoType, nil
		}
		return cty.NilType, function.NewArgErrorf(0, "must be a list, set, or tuple value with either zero or one elements")
	},
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		v := args[0]
		if v.IsNull() {
			return cty.NilVal, function.NewArgErrorf(0, "argument must not be null")
		}
		switch v.LengthInt() {
		case 0:
			return cty.NullVal(retType), nil
		case 1:
			it := v.ElementIterator()
			it.Next()
			_, e := it.Element()
			return e, nil
		}
		return cty.NilVal, function.NewArgErrorf(0, "must be a list, set, or tuple value with either zero or one elements")
	},
})

func makeBoolReduce(all bool) function.Function {
	desc := "Returns true if any element of a list of bools is true."
	if all {
		desc = "Returns true if every element of a list of bools is true (or the list is empty)."
	}
	return function.New(&function.Spec{
		Description: desc,
		Params:      []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
		Type:        function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			unknown := false
			for it := args[0].ElementIterator(); it.Next(); {
				_, e := it.Element()
				if !e.IsKnown() {
					unknown = true
					continue
				}
				t := !e.IsNull() && e.True()
				if t != all {
					return cty.BoolVal(!all), nil
				}
			}
			if unknown {
				return cty.UnknownVal(cty.Bool), nil
			}
			return cty.BoolVal(all), nil
		},
	})
}

// AllTrueFunc is Terraform's alltrue.
var AllTrueFunc = makeBoolReduce(true)

// AnyTrueFunc is Terraform's anytrue.
var AnyTrueFunc = makeBoolReduce(false)

func stringFunc(desc string, params []string, f func(s []string) (cty.Value, error), ret cty.Type) function.Function {
	ps := make([]function.Parameter, len(params))
	for i, p := range params {
		ps[i] = function.Parameter{Name: p, Type: cty.String}
	}
	return function.New(&function.Spec{
		Description: desc,
		Params:      ps,
		Type:        function.StaticReturnType(ret),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			s := make([]string, len(args))
			for i, a := range args {
				s[i] = a.AsString()
			}
			return f(s)
		},
	})
}

// Base64EncodeFunc is Terraform's base64encode.
var Base64EncodeFunc = stringFunc("Encodes a string with Base64.", []string{"str"}, func(s []string) (cty.Value, error) {
	return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(s[0]))), nil
}, cty.String)

// Base64DecodeFunc is Terraform's base64decode: the result must be UTF-8.
var Base64DecodeFunc = stringFunc("Decodes a Base64 string holding UTF-8 text.", []string{"str"}, func(s []string) (cty.Value, error) {
	b, err := base64.StdEncoding.DecodeString(s[0])
	if err != nil {
		return cty.NilVal, function.NewArgErrorf(0, "failed to decode base64 data: %s", err)
	}
	if !utf8.Valid(b) {
		return cty.NilVal, function.NewArgErrorf(0, "the decoded result is not valid UTF-8")
	}
	return cty.StringVal(string(b)), nil
}, cty.String)

func makeHashFunc(h func() hash.Hash) function.Function {
	return stringFunc("Returns the hexadecimal digest of a string.", []string{"str"}, func(s []string) (cty.Value, error) {
		d := h()
		d.Write([]byte(s[0]))
		return cty.StringVal(hex.EncodeToString(d.Sum(nil))), nil
	}, cty.String)
}

func makeBase64HashFunc(h func() hash.Hash) function.Function {
	return stringFunc("Returns the Base64-encoded digest of a string.", []string{"str"}, func(s []string) (cty.Value, error) {
		d := h()
		d.Write([]byte(s[0]))
		return cty.StringVal(base64.StdEncoding.EncodeToString(d.Sum(nil))), nil
	}, cty.String)
}

// markFunc returns a function of one value of any type, marked or not,
// that returns impl's transformation of it.
func markFunc(desc string, impl func(cty.Value) cty.Value) function.Function {
	return function.New(&function.Spec{
		Description: desc,
		Params: []function.Parameter{{
			Name:             "value",
			Type:             cty.DynamicPseudoType,
			AllowNull:        true,
			AllowUnknown:     true,
			AllowDynamicType: true,
			AllowMarked:      true,
		}},
		Type: func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) { return impl(args[0]), nil },
	})
}

// SensitiveFunc is Terraform's sensitive: its result is marked sensitive,
// so that pond shows it as (sensitive value) and keeps only a keyed hash
// of it in the state.
var SensitiveFunc = markFunc("Returns its argument marked sensitive: plan, apply and show do not print it, and the state keeps only a keyed hash of it.",
	func(v cty.Value) cty.Value { return v.Mark(marks.Sensitive) })

// NonsensitiveFunc is Terraform's nonsensitive: it removes the sensitive
// mark of its argument (not of the values inside it).
var NonsensitiveFunc = markFunc("Returns its argument without its sensitive mark, for a value derived from a secret that may be shown (such as its length).",
	func(v cty.Value) cty.Value {
		v, m := v.Unmark()
		delete(m, marks.Sensitive)
		return v.WithMarks(m)
	})

// StartsWithFunc is Terraform's startswith.
var StartsWithFunc = stringFunc("Reports whether a string starts with a prefix.", []string{"str", "prefix"}, func(s []string) (cty.Value, error) {
	return cty.BoolVal(strings.HasPrefix(s[0], s[1])), nil
}, cty.Bool)

// EndsWithFunc is Terraform's endswith.
var EndsWithFunc = stringFunc("Reports whether a string ends with a suffix.", []string{"str", "suffix"}, func(s []string) (cty.Value, error) {
	return cty.BoolVal(strings.HasSuffix(s[0], s[1])), nil
}, cty.Bool)

// StrContainsFunc is Terraform's strcontains.
var StrContainsFunc = stringFunc("Reports whether a string contains a substring.", []string{"str", "substr"}, func(s []string) (cty.Value, error) {
	return cty.BoolVal(strings.Contains(s[0], s[1])), nil
}, cty.Bool)

// URLEncodeFunc is Terraform's urlencode.
var URLEncodeFunc = stringFunc("Applies URL query encoding to a string.", []string{"str"}, func(s []string) (cty.Value, error) {
	return cty.StringVal(url.QueryEscape(s[0])), nil
}, cty.String)

// ReplaceFunc is Terraform's replace: a substring wrapped in slashes is a
// regular expression, and the replacement may use $1-style references.
var ReplaceFunc = stringFunc("Replaces each occurrence of a substring, or of a /regular expression/, in a string.", []string{"str", "substr", "replace"}, func(s []string) (cty.Value, error) {
	str, sub, repl := s[0], s[1], s[2]
	if len(sub) > 1 && sub[0] == '/' && sub[len(sub)-1] == '/' {
		re, err := regexp.Compile(sub[1 : len(sub)-1])
		if err != nil {
			return cty.NilVal, function.NewArgErrorf(1, "invalid regular expression: %s", err)
		}
		return cty.StringVal(re.ReplaceAllString(str, repl)), nil
	}
	return cty.StringVal(strings.ReplaceAll(str, sub, repl)), nil
}, cty.String)

// TimestampFunc is Terraform's timestamp: the current time in RFC 3339
// format, UTC.
var TimestampFunc = function.New(&function.Spec{
	Description: "Returns the current time as an RFC 3339 string in UTC.",
	Type:        function.StaticReturnType(cty.String),
	Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
		return cty.StringVal(time.Now().UTC().Format(time.RFC3339)), nil
	},
})

// UUIDFunc is Terraform's uuid: a new random UUID each call.
var UUIDFunc = function.New(&function.Spec{
	Description: "Returns a new random UUID.",
	Type:        function.StaticReturnType(cty.String),
	Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
		id, err := uuid.NewRandom()
		if err != nil {
			return cty.NilVal, fmt.Errorf("generating a UUID: %w", err)
		}
		return cty.StringVal(id.String()), nil
	},
})
