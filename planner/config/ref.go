package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// RefKind says what a reference's subject is.
type RefKind int

// Reference kinds.
const (
	// RefVar is var.NAME.
	RefVar RefKind = iota
	// RefLocal is local.NAME.
	RefLocal
	// RefResource is TYPE.NAME, a managed resource.
	RefResource
	// RefData is data.TYPE.NAME.
	RefData
	// RefCount is count.index.
	RefCount
	// RefEach is each.key or each.value.
	RefEach
	// RefPath is path.module, path.root or path.cwd.
	RefPath
	// RefSelf is self.
	RefSelf
)

var refKindNames = [...]string{"variable", "local value", "resource", "data source", "count", "each", "path", "self"}

// String names the kind, for messages.
func (k RefKind) String() string {
	if int(k) < len(refKindNames) {
		return refKindNames[k]
	}
	return fmt.Sprintf("RefKind(%d)", int(k))
}

// Ref is a reference found in an expression, split into the object it
// refers to (its subject) and the rest of the traversal.
type Ref struct {
	Kind RefKind
	// Type is the resource or data source type, for RefResource and RefData.
	Type string
	// Name is the variable, local, resource or data source name; the
	// attribute for count ("index"), each ("key", "value") and path
	// ("module", "root", "cwd"); empty for self.
	Name string
	// Remaining is the traversal after the subject, e.g. [0].members for
	// pool.campus[0].members.
	Remaining hcl.Traversal
	// SourceRange covers the whole traversal.
	SourceRange hcl.Range
}

// Subject is the referenced object's address: "var.x", "local.y",
// "pool.campus", "data.sea_query.big", "count.index", "each.key",
// "path.module" or "self".
func (r *Ref) Subject() string {
	switch r.Kind {
	case RefVar:
		return "var." + r.Name
	case RefLocal:
		return "local." + r.Name
	case RefResource:
		return r.Type + "." + r.Name
	case RefData:
		return "data." + r.Type + "." + r.Name
	case RefCount:
		return "count." + r.Name
	case RefEach:
		return "each." + r.Name
	case RefPath:
		return "path." + r.Name
	case RefSelf:
		return "self"
	}
	return "?"
}

// String returns the subject.
func (r *Ref) String() string { return r.Subject() }

// ParseRef splits an absolute traversal into its subject and remainder.
// Any root name other than the reserved ones (var, local, data, count,
// each, path, self, module, terraform, provider) is taken as a managed
// resource type; Validate checks that the type and resource exist.
func ParseRef(tr hcl.Traversal) (*Ref, hcl.Diagnostics) {
	if len(tr) == 0 {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid reference", Detail: "An empty reference is not valid."}}
	}
	root := tr.RootName()
	rng := tr.SourceRange()
	ref := &Ref{SourceRange: rng}
	bad := func(detail string) hcl.Diagnostics {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid reference",
			Detail:   detail,
			Subject:  rng.Ptr(),
		}}
	}
	// attr returns the name of step i when it is an attribute access.
	attr := func(i int) (string, bool) {
		if i >= len(tr) {
			return "", false
		}
		a, ok := tr[i].(hcl.TraverseAttr)
		if !ok {
			return "", false
		}
		return a.Name, true
	}
	switch root {
	case "var", "local":
		name, ok := attr(1)
		if !ok {
			what := map[string]string{"var": "an input variable, such as var.workers", "local": "a local value, such as local.site"}[root]
			return nil, bad(fmt.Sprintf("The %q object cannot be used directly; it must be followed by the name of %s.", root, what))
		}
		ref.Kind, ref.Name, ref.Remaining = RefVar, name, tr[2:]
		if root == "local" {
			ref.Kind = RefLocal
		}
	case "data":
		typ, ok1 := attr(1)
		name, ok2 := attr(2)
		if !ok1 || !ok2 {
			return nil, bad(`A reference to a data source must be followed by its type and name, such as data.sea_query.big.`)
		}
		ref.Kind, ref.Type, ref.Name, ref.Remaining = RefData, typ, name, tr[3:]
	case "count":
		name, ok := attr(1)
		if !ok || name != "index" {
			return nil, bad(`The "count" object has only the attribute "index", as in count.index.`)
		}
		ref.Kind, ref.Name, ref.Remaining = RefCount, name, tr[2:]
	case "each":
		name, ok := attr(1)
		if !ok || (name != "key" && name != "value") {
			return nil, bad(`The "each" object has only the attributes "key" and "value", as in each.key.`)
		}
		ref.Kind, ref.Name, ref.Remaining = RefEach, name, tr[2:]
	case "path":
		name, ok := attr(1)
		if !ok || (name != "module" && name != "root" && name != "cwd") {
			return nil, bad(`The "path" object has only the attributes "module", "root" and "cwd".`)
		}
		ref.Kind, ref.Name, ref.Remaining = RefPath, name, tr[2:]
	case "self":
		ref.Kind, ref.Remaining = RefSelf, tr[1:]
	case "module", "terraform", "provider":
		return nil, bad(fmt.Sprintf("The name %q is reserved and cannot be referred to in an expression.", root))
	default:
		name, ok := attr(1)
		if !ok {
			return nil, bad(fmt.Sprintf("A reference to a resource type must be followed by the resource name, as in %s.NAME.", root))
		}
		ref.Kind, ref.Type, ref.Name, ref.Remaining = RefResource, root, name, tr[2:]
	}
	return ref, nil
}

// References parses every traversal of an expression into a Ref, skipping
// none: invalid traversals are reported as diagnostics.
func References(expr hcl.Expression) ([]*Ref, hcl.Diagnostics) {
	if expr == nil {
		return nil, nil
	}
	return refsFromTraversals(expr.Variables())
}

func refsFromTraversals(trs []hcl.Traversal) ([]*Ref, hcl.Diagnostics) {
	var (
		refs  []*Ref
		diags hcl.Diagnostics
	)
	for _, tr := range trs {
		r, d := ParseRef(tr)
		diags = append(diags, d...)
		if r != nil {
			refs = append(refs, r)
		}
	}
	return refs, diags
}
