package planner

import (
	"context"
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// GenerateImportConfig writes, in HCL, a resource block for each import
// block whose target the configuration does not declare, from the object
// the import reads: its arguments, not what the provider computes. It
// returns nil when every target is declared. Sensitive arguments are
// written as null, with a comment: their values stay out of files.
func (e *Engine) GenerateImportConfig(ctx context.Context, prior *state.State) ([]byte, hcl.Diagnostics) {
	if prior == nil {
		prior = state.New()
	}
	e.useLineage(prior)
	targets, diags := e.expandImports()
	if diags.HasErrors() {
		return nil, diags
	}
	f := hclwrite.NewEmptyFile()
	n := 0
	done := map[string]bool{}
	specs := map[*providers.Schema]hcldec.Spec{}
	for _, t := range targets {
		ra := t.addr.ResourceAddress()
		if e.cfg.Resources[ra.String()] != nil {
			continue
		}
		if t.addr.HasKey() {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot generate configuration for an instance", Detail: fmt.Sprintf("%s names an instance of a resource with count or for_each, which pond cannot write for you: declare %s yourself, with its count or for_each.", t.addr, ra), Subject: t.block.ToRange.Ptr()})
			continue
		}
		if done[ra.String()] {
			continue
		}
		done[ra.String()] = true
		r := &config.Resource{Mode: config.ManagedResource, Type: ra.Type, Name: ra.Name, Config: hcl.EmptyBody(), DeclRange: t.block.DeclRange, TypeRange: t.block.ToRange}
		info, d := e.resolveResource(ctx, r, specs)
		diags = append(diags, d...)
		if info == nil {
			continue
		}
		resp := info.prov.p.ImportResource(ctx, providers.ImportRequest{TypeName: ra.Type, ID: t.id, Address: t.addr.String(), Lineage: e.stateLineage(), Config: cty.NullVal(info.schema.ImpliedType())})
		d = providerDiags(resp.Diagnostics, "Cannot import "+t.addr.String(), t.block.DeclRange.Ptr())
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		v, err := convert.Convert(resp.Imported, info.schema.ImpliedType())
		if err != nil {
			diags = append(diags, errDiag("Provider returned an invalid value for "+t.addr.String(), err, t.block.DeclRange.Ptr()))
			continue
		}
		body := f.Body()
		if n > 0 {
			body.AppendNewline()
		}
		body.AppendUnstructuredTokens(hclwrite.Tokens{{Type: hclsyntax.TokenComment, Bytes: []byte(fmt.Sprintf("# __generated__ by pondctl from %q\n", t.id))}})
		blk := body.AppendNewBlock(ra.Type, []string{ra.Name})
		writeArguments(blk.Body(), info.schema, v)
		n++
	}
	if diags.HasErrors() || n == 0 {
		return nil, diags
	}
	head := "# __generated__ by pondctl\n# Review these resources and move them into your main configuration files.\n\n"
	return append([]byte(head), hclwrite.Format(f.Bytes())...), diags
}

// writeArguments writes the non-null arguments of v (of schema s) into
// body: its attributes a configuration may set, then its nested blocks.
func writeArguments(body *hclwrite.Body, s *providers.Schema, v cty.Value) {
	if v.IsNull() || !v.IsKnown() {
		return
	}
	names := make([]string, 0, len(s.Attributes))
	for name := range s.Attributes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a := s.Attributes[name]
		if !a.Optional && !a.Required {
			continue
		}
		av := v.GetAttr(name)
		if av.IsNull() || !av.IsWhollyKnown() {
			continue
		}
		if a.Sensitive {
			body.SetAttributeValue(name, cty.NullVal(av.Type()))
			body.AppendUnstructuredTokens(hclwrite.Tokens{{Type: hclsyntax.TokenComment, Bytes: []byte("# " + name + " is sensitive: set it yourself\n")}})
			continue
		}
		body.SetAttributeValue(name, av)
	}
	blocks := make([]string, 0, len(s.BlockTypes))
	for name := range s.BlockTypes {
		blocks = append(blocks, name)
	}
	sort.Strings(blocks)
	for _, name := range blocks {
		nb := s.BlockTypes[name]
		bv := v.GetAttr(name)
		if bv.IsNull() || !bv.IsKnown() {
			continue
		}
		var elems []cty.Value
		if nb.Nesting == providers.NestingSingle {
			elems = []cty.Value{bv}
		} else {
			for it := bv.ElementIterator(); it.Next(); {
				_, ev := it.Element()
				elems = append(elems, ev)
			}
		}
		for _, ev := range elems {
			writeArguments(body.AppendNewBlock(name, nil).Body(), &nb.Block, ev)
		}
	}
}
