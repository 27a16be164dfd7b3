package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// testFileSuffix names the files pondctl test runs.
const testFileSuffix = ".pondtest.hcl"

// testFile is a decoded *.pondtest.hcl file: the variables it sets for
// every run, and its runs in order.
type testFile struct {
	// Path is the file's path relative to the working directory.
	Path string
	// Variables are the file-level variables block's assignments.
	Variables hcl.Attributes
	Runs      []*testRun
}

// testCommand is what a run does: plan, or plan and apply.
type testCommand string

const (
	testPlan  testCommand = "plan"
	testApply testCommand = "apply"
)

// testRun is a run block.
type testRun struct {
	Name      string
	DeclRange hcl.Range
	Command   testCommand
	Variables hcl.Attributes
	Asserts   []*testAssert
	// ExpectFailures are the checkable objects, as traversals (var.x,
	// check.x), whose checks this run expects to fail.
	ExpectFailures []hcl.Traversal
}

// testAssert is an assert block of a run.
type testAssert struct {
	Condition    hcl.Expression
	ErrorMessage hcl.Expression
	DeclRange    hcl.Range
}

var testFileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "run", LabelNames: []string{"name"}},
		{Type: "variables"},
	},
}

var testRunSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "command"},
		{Name: "expect_failures"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variables"},
		{Type: "assert"},
	},
}

var testAssertSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true},
		{Name: "error_message", Required: true},
	},
}

// findTestFiles returns the *.pondtest.hcl files of dir and of its test
// directory testDir (relative to dir), in lexical order of their paths.
// A test directory that does not exist is no error unless explicit.
func findTestFiles(dir, testDir string, explicit bool) ([]string, error) {
	var files []string
	for _, d := range []string{dir, filepath.Join(dir, testDir)} {
		entries, err := os.ReadDir(d)
		if err != nil {
			if os.IsNotExist(err) && (d == dir || !explicit) {
				continue
			}
			return nil, fmt.Errorf("reading the test directory: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), testFileSuffix) {
				files = append(files, filepath.Join(d, e.Name()))
			}
		}
		if filepath.Clean(testDir) == "." {
			break
		}
	}
	sort.Strings(files)
	return files, nil
}

// decodeTestFile parses and decodes one test file; name is the path the
// diagnostics give. Every error is at its file, line and column.
func decodeTestFile(p *hclparse.Parser, path, name string) (*testFile, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Failed to read test file", Detail: fmt.Sprintf("Cannot read %s: %v.", name, err)}}
	}
	f, diags := p.ParseHCL(src, name)
	if diags.HasErrors() {
		return nil, diags
	}
	return decodeTestBody(f.Body, name, diags)
}

func decodeTestBody(body hcl.Body, name string, diags hcl.Diagnostics) (*testFile, hcl.Diagnostics) {
	tf := &testFile{Path: name}
	content, d := body.Content(testFileSchema)
	diags = append(diags, d...)
	if content == nil {
		return nil, diags
	}
	seen := map[string]hcl.Range{}
	var varsBlock *hcl.Block
	for _, b := range content.Blocks {
		switch b.Type {
		case "variables":
			if varsBlock != nil {
				diags = append(diags, duplicateBlock("variables", b.DefRange, varsBlock.DefRange))
				continue
			}
			varsBlock = b
			attrs, d := b.Body.JustAttributes()
			diags = append(diags, d...)
			tf.Variables = attrs
		case "run":
			name := b.Labels[0]
			if !hclsyntax.ValidIdentifier(name) {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid run block name",
					Detail: fmt.Sprintf("A run block's name must be a valid identifier (letters, digits, underscores and dashes, not starting with a digit), not %q.", name), Subject: b.LabelRanges[0].Ptr()})
				continue
			}
			if prev, ok := seen[name]; ok {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate run block",
					Detail: fmt.Sprintf("A run block named %q was already declared at %s. Each run of a file needs its own name.", name, prev), Subject: b.LabelRanges[0].Ptr()})
				continue
			}
			seen[name] = b.DefRange
			r, d := decodeTestRun(b)
			diags = append(diags, d...)
			if r != nil {
				tf.Runs = append(tf.Runs, r)
			}
		}
	}
	return tf, diags
}

func duplicateBlock(typ string, rng, prev hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate " + typ + " block",
		Detail: fmt.Sprintf("Only one %s block is allowed here; another was declared at %s.", typ, prev), Subject: rng.Ptr()}
}

func decodeTestRun(b *hcl.Block) (*testRun, hcl.Diagnostics) {
	r := &testRun{Name: b.Labels[0], DeclRange: b.DefRange, Command: testApply}
	content, diags := b.Body.Content(testRunSchema)
	if content == nil {
		return nil, diags
	}
	if a, ok := content.Attributes["command"]; ok {
		switch kw := hcl.ExprAsKeyword(a.Expr); kw {
		case "plan", "apply":
			r.Command = testCommand(kw)
		default:
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid run command",
				Detail: "The command argument of a run block is plan or apply, without quotes.", Subject: a.Expr.Range().Ptr()})
		}
	}
	if a, ok := content.Attributes["expect_failures"]; ok {
		exprs, d := hcl.ExprList(a.Expr)
		diags = append(diags, d...)
		for _, e := range exprs {
			t, d := hcl.AbsTraversalForExpr(e)
			diags = append(diags, d...)
			if d.HasErrors() {
				continue
			}
			if len(t) != 2 || t.RootName() != "var" && t.RootName() != "check" {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid expect_failures reference",
					Detail: "expect_failures lists input variables whose validation this run expects to fail, as var.NAME, and check blocks whose assertions it expects to fail, as check.NAME.", Subject: e.Range().Ptr()})
				continue
			}
			if _, ok := t[1].(hcl.TraverseAttr); !ok {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid expect_failures reference",
					Detail: "expect_failures lists input variables as var.NAME and check blocks as check.NAME.", Subject: e.Range().Ptr()})
				continue
			}
			r.ExpectFailures = append(r.ExpectFailures, t)
		}
	}
	var varsBlock *hcl.Block
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "variables":
			if varsBlock != nil {
				diags = append(diags, duplicateBlock("variables", blk.DefRange, varsBlock.DefRange))
				continue
			}
			varsBlock = blk
			attrs, d := blk.Body.JustAttributes()
			diags = append(diags, d...)
			r.Variables = attrs
		case "assert":
			ac, d := blk.Body.Content(testAssertSchema)
			diags = append(diags, d...)
			if ac == nil || d.HasErrors() {
				continue
			}
			r.Asserts = append(r.Asserts, &testAssert{Condition: ac.Attributes["condition"].Expr, ErrorMessage: ac.Attributes["error_message"].Expr, DeclRange: blk.DefRange})
		}
	}
	return r, diags
}
