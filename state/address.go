package state

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Address names a resource (Key nil) or one instance of a resource, as
// Terraform prints them: pool.campus, pool.w[0], pool.w["a"],
// data.sea_query.big. The address of a resource and of its single unkeyed
// instance are the same string; which one is meant depends on the
// operation, as with Terraform's state commands.
//
// Address values are comparable with == (Key is nil, an int or a string).
type Address struct {
	// Mode is ModeManaged or ModeData; "" is taken as ModeManaged.
	Mode string
	// Type is the resource type, such as "pool".
	Type string
	// Name is the resource name from the configuration block label.
	Name string
	// Key is nil, an int (count) or a string (for_each).
	Key any
}

// ResourceAddress returns the address of the resource a belongs to: a without
// its instance key.
func (a Address) ResourceAddress() Address {
	a.Key = nil
	a.Mode = a.mode()
	return a
}

// Instance returns the address of the instance of a's resource with the
// given key (nil for a resource without count or for_each).
func (a Address) Instance(key any) Address {
	a.Key = normalizeKey(key)
	return a
}

// HasKey reports whether a carries an instance key.
func (a Address) HasKey() bool { return a.Key != nil }

// IsData reports whether a names a data resource.
func (a Address) IsData() bool { return a.Mode == ModeData }

func (a Address) mode() string {
	if a.Mode == "" {
		return ModeManaged
	}
	return a.Mode
}

// String formats a exactly as Terraform prints addresses.
func (a Address) String() string {
	var b strings.Builder
	if a.Mode == ModeData {
		b.WriteString("data.")
	}
	b.WriteString(a.Type)
	b.WriteByte('.')
	b.WriteString(a.Name)
	b.WriteString(KeyString(a.Key))
	return b.String()
}

// KeyString formats an instance key as the bracketed suffix of an address:
// "" for nil, [3] for an int, ["a"] for a string (quoted with HCL's string
// escapes, template introducers doubled).
func KeyString(key any) string {
	switch k := normalizeKey(key).(type) {
	case nil:
		return ""
	case int:
		return "[" + strconv.Itoa(k) + "]"
	case string:
		return "[" + quoteHCL(k) + "]"
	default:
		return fmt.Sprintf("[%v]", key)
	}
}

// quoteHCL quotes s as an HCL string literal, so that an address can be read
// back as an HCL traversal.
func quoteHCL(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '$' || r == '%':
			b.WriteRune(r)
			if i+1 < len(s) && s[i+1] == '{' {
				b.WriteRune(r)
			}
		case !unicode.IsPrint(r):
			if r < 0x10000 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// normalizeKey converts the key representations that appear in practice (JSON
// numbers, other integer types) to int, leaving nil and strings alone. Other
// values are returned unchanged.
func normalizeKey(k any) any {
	switch k := k.(type) {
	case nil, int, string:
		return k
	case float64:
		if k == math.Trunc(k) && k >= 0 && k <= 1<<53 {
			return int(k)
		}
	case int64:
		return int(k)
	case int32:
		return int(k)
	case uint:
		return int(k)
	case uint64:
		if k <= math.MaxInt64 {
			return int(k)
		}
	case uint32:
		return int(k)
	}
	return k
}

// validKey normalizes k and reports whether it is a valid instance key.
func validKey(k any) (any, error) {
	n := normalizeKey(k)
	switch v := n.(type) {
	case nil, string:
		return n, nil
	case int:
		if v < 0 {
			return nil, fmt.Errorf("instance key %d is negative", v)
		}
		return n, nil
	}
	return nil, fmt.Errorf("instance key %v (%T) is neither a whole non-negative number nor a string", k, k)
}

// compareKeys orders keys: no key first, then ints numerically, then strings.
func compareKeys(a, b any) int {
	rank := func(k any) int {
		switch k.(type) {
		case nil:
			return 0
		case int:
			return 1
		case string:
			return 2
		}
		return 3
	}
	a, b = normalizeKey(a), normalizeKey(b)
	if ra, rb := rank(a), rank(b); ra != rb {
		return cmp.Compare(ra, rb)
	}
	switch a := a.(type) {
	case int:
		return cmp.Compare(a, b.(int))
	case string:
		return strings.Compare(a, b.(string))
	}
	return 0
}

// CompareAddresses orders addresses as Addresses lists them: by mode (data
// before managed), type, name, then key.
func CompareAddresses(a, b Address) int {
	return cmp.Or(
		strings.Compare(a.mode(), b.mode()),
		strings.Compare(a.Type, b.Type),
		strings.Compare(a.Name, b.Name),
		compareKeys(a.Key, b.Key),
	)
}

// ParseAddress parses a resource or resource instance address as given on
// the command line: pool.campus, pool.w[0], pool.w["a"], data.sea_query.big.
// Errors give the column of the problem.
func ParseAddress(s string) (Address, error) {
	trav, diags := hclsyntax.ParseTraversalAbs([]byte(s), "", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		d := diags[0]
		return Address{}, addrError(s, d.Subject, "%s", strings.TrimSuffix(diagText(d), "."))
	}
	if len(trav) == 0 {
		return Address{}, addrError(s, nil, "empty address")
	}
	var a Address
	root := trav.RootName()
	rest := trav[1:]
	switch root {
	case "data":
		a.Mode = ModeData
		if len(rest) < 2 {
			return Address{}, addrError(s, rangeOf(trav[len(trav)-1]), "a data resource address is data.TYPE.NAME")
		}
		t, ok := rest[0].(hcl.TraverseAttr)
		if !ok {
			return Address{}, addrError(s, rangeOf(rest[0]), "expected a resource type after \"data.\"")
		}
		a.Type = t.Name
		rest = rest[1:]
	case "module":
		return Address{}, addrError(s, rangeOf(trav[0]), "module addresses are not supported: pond has no modules")
	default:
		a.Mode = ModeManaged
		a.Type = root
		if len(rest) < 1 {
			return Address{}, addrError(s, rangeOf(trav[0]), "a resource address is TYPE.NAME, optionally followed by [KEY]")
		}
	}
	n, ok := rest[0].(hcl.TraverseAttr)
	if !ok {
		return Address{}, addrError(s, rangeOf(rest[0]), "expected a resource name after %q", strings.TrimSuffix(a.String(), "."))
	}
	a.Name = n.Name
	rest = rest[1:]
	if len(rest) > 0 {
		idx, ok := rest[0].(hcl.TraverseIndex)
		if !ok {
			return Address{}, addrError(s, rangeOf(rest[0]), "unexpected attribute after the resource name: an instance key is written [0] or [\"key\"]")
		}
		k, err := keyFromCty(idx.Key)
		if err != nil {
			return Address{}, addrError(s, rangeOf(rest[0]), "%v", err)
		}
		a.Key = k
		rest = rest[1:]
	}
	if len(rest) > 0 {
		return Address{}, addrError(s, rangeOf(rest[0]), "unexpected text after the instance key")
	}
	return a, nil
}

func diagText(d *hcl.Diagnostic) string {
	if d.Detail != "" {
		return d.Summary + ": " + d.Detail
	}
	return d.Summary
}

func rangeOf(t hcl.Traverser) *hcl.Range {
	r := t.SourceRange()
	return &r
}

func addrError(s string, r *hcl.Range, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if r != nil {
		return fmt.Errorf("invalid address %q: %d:%d: %s", s, r.Start.Line, r.Start.Column, msg)
	}
	return fmt.Errorf("invalid address %q: %s", s, msg)
}

func keyFromCty(v cty.Value) (any, error) {
	if v.IsNull() || !v.IsKnown() {
		return nil, fmt.Errorf("an instance key must be a number or a string")
	}
	switch v.Type() {
	case cty.String:
		return v.AsString(), nil
	case cty.Number:
		bf := v.AsBigFloat()
		if !bf.IsInt() || bf.Sign() < 0 {
			return nil, fmt.Errorf("instance key %s is not a whole non-negative number", bf.Text('g', -1))
		}
		i, acc := bf.Int64()
		if acc != 0 || i > math.MaxInt32 {
			return nil, fmt.Errorf("instance key %s is too large", bf.Text('g', -1))
		}
		return int(i), nil
	}
	return nil, fmt.Errorf("an instance key must be a number or a string, not %s", v.Type().FriendlyName())
}
