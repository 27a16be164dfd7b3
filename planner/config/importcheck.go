package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/state"
)

// Import is an import block: the existing object named ID is adopted into
// the state as the instance To names, the next time the configuration is
// applied.
type Import struct {
	// To is the resource the block imports into (no instance key).
	To state.Address
	// ToKey is the expression of To's instance key, or nil when the
	// address has none. It may refer to each.key and each.value.
	ToKey hcl.Expression
	// ID is the expression of the object's ID, as pondctl import takes it.
	ID hcl.Expression
	// ForEach is nil when absent.
	ForEach   hcl.Expression
	ToRange   hcl.Range
	DeclRange hcl.Range
}

// Check is a check block: assertions about the infrastructure, evaluated
// after planning and after applying, whose failures are warnings.
type Check struct {
	Name string
	// Data are the check's own data sources, read only for its assertions;
	// their Addr is data.TYPE.NAME, visible only inside the check.
	Data      []*Resource
	Asserts   []*Assert
	DeclRange hcl.Range
}

// Assert is an assert block of a check.
type Assert struct {
	Condition    hcl.Expression
	ErrorMessage hcl.Expression
	DeclRange    hcl.Range
}

// DataResource returns the check's own data source at addr
// (data.TYPE.NAME), or nil.
func (c *Check) DataResource(addr string) *Resource {
	for _, d := range c.Data {
		if d.Addr() == addr {
			return d
		}
	}
	return nil
}

var importSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "to", Required: true},
	{Name: "id", Required: true},
	{Name: "for_each"},
	{Name: "provider"},
}}

var checkSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "data", LabelNames: []string{"type", "name"}},
	{Type: "assert"},
}}

var assertSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "condition", Required: true},
	{Name: "error_message", Required: true},
}}

func (l *loader) decodeImport(blk *hcl.Block) hcl.Diagnostics {
	content, diags := blk.Body.Content(importSchema)
	if diags.HasErrors() {
		return diags
	}
	if a := content.Attributes["provider"]; a != nil {
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unsupported argument",
			Detail:   "An import block uses the provider of the resource it imports into; set provider in that resource block instead.",
			Subject:  a.NameRange.Ptr(),
		})
	}
	im := &Import{DeclRange: blk.DefRange, ID: content.Attributes["id"].Expr}
	if a := content.Attributes["for_each"]; a != nil {
		im.ForEach = a.Expr
	}
	to := content.Attributes["to"].Expr
	im.ToRange = to.Range()
	var d hcl.Diagnostics
	if ix, ok := to.(*hclsyntax.IndexExpr); ok {
		// pool.x[each.key]: the key is an expression, evaluated per
		// instance of the block.
		im.To, d = l.moveEndpoint(ix.Collection, "to")
		if !d.HasErrors() && im.To.HasKey() {
			d = append(d, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid address", Detail: "The to argument names one instance: nothing may follow its key.", Subject: to.Range().Ptr()})
		}
		im.ToKey = ix.Key
	} else {
		var a state.Address
		a, d = l.moveEndpoint(to, "to")
		im.To = a.ResourceAddress()
		if a.HasKey() {
			im.ToKey = hcl.StaticExpr(keyValue(a.Key), to.Range())
		}
	}
	diags = append(diags, d...)
	if d.HasErrors() {
		return diags
	}
	if im.ForEach == nil {
		for _, tr := range im.ID.Variables() {
			if r, _ := ParseRef(tr); r != nil && r.Kind == RefEach {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: `Reference to "each" in import block without for_each`, Detail: `The "each" object is only available in an import block that sets for_each.`, Subject: tr.SourceRange().Ptr()})
			}
		}
		if im.ToKey != nil {
			for _, tr := range im.ToKey.Variables() {
				if r, _ := ParseRef(tr); r != nil && r.Kind == RefEach {
					diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: `Reference to "each" in import block without for_each`, Detail: `The "each" object is only available in an import block that sets for_each.`, Subject: tr.SourceRange().Ptr()})
				}
			}
		}
	}
	if diags.HasErrors() {
		return diags
	}
	l.cfg.Imports = append(l.cfg.Imports, im)
	return diags
}

func (l *loader) decodeCheck(blk *hcl.Block) hcl.Diagnostics {
	if !hclsyntax.ValidIdentifier(blk.Labels[0]) {
		return checkName(blk, 0, "check")
	}
	c := &Check{Name: blk.Labels[0], DeclRange: blk.DefRange}
	for _, prev := range l.cfg.Checks {
		if prev.Name == c.Name {
			return hcl.Diagnostics{duplicate("Duplicate check block", fmt.Sprintf("A check block named %q", c.Name), prev.DeclRange, blk.DefRange)}
		}
	}
	content, diags := blk.Body.Content(checkSchema)
	for _, b := range content.Blocks {
		switch b.Type {
		case "assert":
			ac, d := b.Body.Content(assertSchema)
			diags = append(diags, d...)
			if d.HasErrors() {
				continue
			}
			c.Asserts = append(c.Asserts, &Assert{Condition: ac.Attributes["condition"].Expr, ErrorMessage: ac.Attributes["error_message"].Expr, DeclRange: b.DefRange})
		case "data":
			r, d := l.resourceHeader(b, DataResource)
			diags = append(diags, d...)
			if d.HasErrors() {
				continue
			}
			if prev := c.DataResource(r.Addr()); prev != nil {
				diags = append(diags, duplicate(fmt.Sprintf("Duplicate %s configuration", r.Addr()), fmt.Sprintf("A %s data source named %q", r.Type, r.Name), prev.DeclRange, b.DefRange))
				continue
			}
			bc, remain, d := b.Body.PartialContent(resourceSchema)
			diags = append(diags, d...)
			r.Config = remain
			for _, name := range []string{"count", "for_each", "depends_on"} {
				if a := bc.Attributes[name]; a != nil {
					diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unsupported argument in a check's data source", Detail: fmt.Sprintf("A data source inside a check block is read once, after everything else: %s is not allowed here.", name), Subject: a.NameRange.Ptr()})
				}
			}
			if a := bc.Attributes["provider"]; a != nil {
				diags = append(diags, decodeMetaArguments(r, hcl.Attributes{"provider": a})...)
			}
			diags = append(diags, decodeLifecycleBlocks(r, bc.Blocks)...)
			c.Data = append(c.Data, r)
		}
	}
	if len(c.Asserts) == 0 && !diags.HasErrors() {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing assert block", Detail: "A check block needs at least one assert block, with a condition and an error_message.", Subject: blk.DefRange.Ptr()})
	}
	if diags.HasErrors() {
		return diags
	}
	l.cfg.Checks = append(l.cfg.Checks, c)
	return diags
}

// validateImportsAndChecks checks the references of the import and check
// blocks. Whether an import's target is declared is for the planner to
// say: pondctl plan -generate-config-out writes the missing blocks.
func (c *Config) validateImportsAndChecks() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, im := range c.Imports {
		// An import block is evaluated before any resource: it may
		// refer to variables and local values only.
		sc := refScope{each: im.ForEach != nil, noResources: true}
		if im.ForEach != nil {
			diags = append(diags, c.checkTraversals(im.ForEach.Variables(), refScope{noResources: true})...)
		}
		diags = append(diags, c.checkTraversals(im.ID.Variables(), sc)...)
		if im.ToKey != nil {
			diags = append(diags, c.checkTraversals(im.ToKey.Variables(), sc)...)
		}
	}
	for i, im := range c.Imports {
		if im.ForEach != nil {
			continue
		}
		for _, prev := range c.Imports[:i] {
			if prev.ForEach == nil && prev.To == im.To && sameStaticKey(prev.ToKey, im.ToKey) {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate import configuration", Detail: fmt.Sprintf("An import block for this address was already declared at %s: each object can be imported into one address by one block only.", RangeString(prev.DeclRange)), Subject: im.ToRange.Ptr()})
			}
		}
	}
	for _, ch := range c.Checks {
		own := map[string]bool{}
		for _, d := range ch.Data {
			if c.Resources[d.Addr()] != nil {
				diags = append(diags, duplicate(fmt.Sprintf("Duplicate %s configuration", d.Addr()), fmt.Sprintf("A %s data source named %q", d.Type, d.Name), c.Resources[d.Addr()].DeclRange, d.DeclRange))
			}
			own[d.Addr()] = true
		}
		for _, d := range ch.Data {
			diags = append(diags, c.checkTraversals(BodyTraversals(d.Config), refScope{checkData: own, self: d.Addr()})...)
		}
		for _, a := range ch.Asserts {
			diags = append(diags, c.checkTraversals(a.Condition.Variables(), refScope{checkData: own})...)
			diags = append(diags, c.checkTraversals(a.ErrorMessage.Variables(), refScope{checkData: own})...)
		}
	}
	return diags
}

// keyValue is an instance key as a value: a number or a string.
func keyValue(k any) cty.Value {
	if i, ok := k.(int); ok {
		return cty.NumberIntVal(int64(i))
	}
	return cty.StringVal(fmt.Sprint(k))
}

// sameStaticKey reports whether two constant instance-key expressions (or
// two absent keys) name the same key.
func sameStaticKey(a, b hcl.Expression) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	av, d1 := a.Value(nil)
	bv, d2 := b.Value(nil)
	if d1.HasErrors() || d2.HasErrors() || !av.IsWhollyKnown() || !bv.IsWhollyKnown() {
		return false
	}
	return av.Type().Equals(bv.Type()) && av.Equals(bv).True()
}
