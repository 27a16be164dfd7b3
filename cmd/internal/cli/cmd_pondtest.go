package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/cmd/internal/ui/jsonview"
	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/planner/funcs"
	"github.com/pond-htc/pond/planner/marks"
	"github.com/pond-htc/pond/state"
)

// erroredTestState is where pondctl test saves, in the working directory,
// the state of what a test file's clean-up failed to destroy.
const erroredTestState = "errored_test.pond.state"

// testRunResult is the outcome of one run block.
type testRunResult struct {
	run     *testRun
	status  string
	elapsed time.Duration
	// diags are the run's errors and warnings, assertion failures
	// included.
	diags hcl.Diagnostics
	// message says why the run failed or errored, for JUnit.
	message string
}

// testFileResult is the outcome of one test file.
type testFileResult struct {
	file   *testFile
	status string
	runs   []*testRunResult
	// leftOver lists what the clean-up failed to destroy.
	leftOver []string
}

// memStateWriter keeps the last state an apply wrote: a test's state is
// never stored.
type memStateWriter struct{ last *state.State }

// WriteState implements planner.StateWriter.
func (w *memStateWriter) WriteState(_ context.Context, s *state.State) error {
	s.Lineage = w.last.Lineage
	s.PondVersion = Version
	w.last = s
	return nil
}

// testRunner runs the test files of one working directory.
type testRunner struct {
	m       *meta
	cfg     *config.Config
	cliVars []config.VarArg
	sea     string
	stop    <-chan struct{}
	// managed holds the addresses of the working directory's own state,
	// which a test may not create: they name pools that run.
	managed map[string]bool
}

func (m *meta) cmdTest(ctx context.Context, args []string) int {
	fs := m.newFlagSet("test", "test [options]")
	testDir := fs.String("test-directory", "tests", "directory of the *.pondtest.hcl files, relative to the configuration")
	var filters stringList
	fs.Var(&filters, "filter", "run only this test file (its path as listed; repeatable)")
	jsonOut := fs.Bool("json", false, "print the machine-readable UI: one JSON message a line")
	junit := fs.String("junit-xml", "", "also write the results to this file as JUnit XML")
	var vf varFlags
	vf.register(fs)
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if *jsonOut {
		m.startJSON()
	}
	if fs.NArg() > 0 {
		return m.errorf("test takes no arguments, got %q", strings.Join(fs.Args(), " "))
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test-directory" })
	cfg, ok := m.loadConfig()
	if !ok {
		return 1
	}
	paths, err := findTestFiles(m.dir, *testDir, explicit)
	if err != nil {
		return m.fail("Cannot find the test files", err)
	}
	files, ok := m.loadTestFiles(paths, filters)
	if !ok {
		return 1
	}
	ctx, stop, release := m.interruptible(ctx)
	defer release()
	tr := &testRunner{m: m, cfg: cfg, cliVars: vf.args, sea: m.seaAddr("", cfg), stop: stop, managed: map[string]bool{}}
	if _, own, err := m.ownState(ctx, cfg); err != nil {
		return m.fail("Failed to load state", err)
	} else if own != nil {
		for _, r := range own.Resources {
			for _, inst := range r.Instances {
				tr.managed[state.Address{Mode: r.Mode, Type: r.Type, Name: r.Name, Key: inst.IndexKey}.String()] = true
			}
		}
	}

	if m.view != nil {
		abstract := map[string][]string{}
		for _, f := range files {
			names := []string{}
			for _, r := range f.Runs {
				names = append(names, r.Name)
			}
			abstract[f.Path] = names
		}
		m.view.TestAbstract(abstract)
	}
	var results []*testFileResult
	for _, f := range files {
		results = append(results, tr.runFile(ctx, f))
	}
	sum := testSummary(results)
	if m.view != nil {
		m.view.TestSummary(sum)
	} else {
		c := m.col()
		line := sum.Message()
		if sum.Status == jsonview.StatusPass {
			line = c.bold(c.green(line))
		} else if sum.Status != jsonview.StatusSkip {
			line = c.bold(c.red(line))
		}
		fmt.Fprintf(m.stdout, "\n%s\n", line)
	}
	if *junit != "" {
		if err := writeJUnit(m.path(*junit), results, m.relFiles(), m.relDiags); err != nil {
			return m.fail("Cannot write the JUnit XML report", err)
		}
	}
	if sum.Status == jsonview.StatusFail || sum.Status == jsonview.StatusError || (m.view != nil && m.view.Err() != nil) {
		return 1
	}
	return 0
}

// ownState reads the working directory's state, nil when there is none.
func (m *meta) ownState(ctx context.Context, cfg *config.Config) (state.Backend, *state.State, error) {
	b, err := m.backendFor(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	s, err := b.Read(ctx)
	return b, s, err
}

// loadTestFiles decodes the test files, keeping those filters name (all
// when none). Every error is printed, at its file, line and column.
func (m *meta) loadTestFiles(paths []string, filters []string) ([]*testFile, bool) {
	p := hclparse.NewParser()
	var files []*testFile
	var diags hcl.Diagnostics
	want := map[string]bool{}
	for _, f := range filters {
		want[filepath.Clean(f)] = true
	}
	for _, path := range paths {
		name := m.relPath(path)
		if len(want) > 0 && !want[filepath.Clean(name)] {
			continue
		}
		delete(want, filepath.Clean(name))
		tf, d := decodeTestFile(p, path, name)
		diags = append(diags, d...)
		if tf != nil {
			files = append(files, tf)
		}
	}
	if m.files == nil {
		m.files = map[string]*hcl.File{}
	}
	for name, f := range p.Files() {
		m.files[name] = f
	}
	for f := range want {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Test file not found",
			Detail: fmt.Sprintf("-filter names %s, which is not a %s file of the working directory or of the test directory.", f, testFileSuffix)})
	}
	if m.diags(diags) {
		return nil, false
	}
	return files, true
}

// runFile runs a test file's runs in order against one state, then
// destroys whatever they applied, even when a run failed.
func (tr *testRunner) runFile(ctx context.Context, f *testFile) *testFileResult {
	m := tr.m
	res := &testFileResult{file: f, status: jsonview.StatusPass}
	if m.view != nil {
		m.view.TestFile(jsonview.TestFile{Path: f.Path, Progress: jsonview.ProgressStarting})
	} else {
		fmt.Fprintf(m.stdout, "%s... in progress\n", f.Path)
	}
	st := state.New()
	var applyVars map[string]cty.Value
	runOutputs := map[string]cty.Value{}
	skipRest := false
	for _, r := range f.Runs {
		rr := &testRunResult{run: r, status: jsonview.StatusSkip}
		res.runs = append(res.runs, rr)
		select {
		case <-tr.stop:
			skipRest = true
		default:
		}
		if !skipRest {
			if m.view != nil {
				m.view.TestRun(jsonview.TestRun{Path: f.Path, Run: r.Name, Progress: jsonview.ProgressStarting})
			}
			start := time.Now()
			var vars map[string]cty.Value
			st, vars = tr.runOne(ctx, f, r, st, runOutputs, rr)
			rr.elapsed = time.Since(start)
			if r.Command == testApply && vars != nil {
				applyVars = vars
			}
			if rr.status == jsonview.StatusError {
				// The state may not be what the next runs expect.
				skipRest = true
			}
		}
		tr.reportRun(f, rr)
		res.status = worseStatus(res.status, rr.status)
	}
	if m.view != nil {
		m.view.TestFile(jsonview.TestFile{Path: f.Path, Progress: jsonview.ProgressTeardown})
	} else if hasResources(st) {
		fmt.Fprintf(m.stdout, "%s... tearing down\n", f.Path)
	}
	if left, diags := tr.cleanUp(ctx, st, applyVars); len(left) > 0 || diags.HasErrors() {
		res.status = worseStatus(res.status, jsonview.StatusError)
		res.leftOver = left
		tr.printDiags(f, nil, diags)
		if len(left) > 0 {
			if m.view != nil {
				m.view.TestCleanup(f.Path, left)
			} else {
				fmt.Fprintf(m.stderr, "\nPond left the following resources in state after executing %s, and they need to be cleaned up manually:\n  - %s\n", f.Path, strings.Join(left, "\n  - "))
			}
		}
	}
	if m.view != nil {
		m.view.TestFile(jsonview.TestFile{Path: f.Path, Progress: jsonview.ProgressComplete, Status: res.status})
	} else {
		fmt.Fprintf(m.stdout, "%s... %s\n", f.Path, tr.colorStatus(res.status))
	}
	return res
}

func (tr *testRunner) colorStatus(s string) string {
	c := tr.m.col()
	switch s {
	case jsonview.StatusPass:
		return c.green(s)
	case jsonview.StatusFail, jsonview.StatusError:
		return c.red(s)
	}
	return c.yellow(s)
}

// reportRun prints a run's status and diagnostics.
func (tr *testRunner) reportRun(f *testFile, rr *testRunResult) {
	m := tr.m
	if m.view != nil {
		tr.printDiags(f, rr.run, rr.diags)
		m.view.TestRun(jsonview.TestRun{Path: f.Path, Run: rr.run.Name, Progress: jsonview.ProgressComplete, Elapsed: rr.elapsed.Milliseconds(), Status: rr.status})
		return
	}
	fmt.Fprintf(m.stdout, "  run %q... %s\n", rr.run.Name, tr.colorStatus(rr.status))
	tr.printDiags(f, rr.run, rr.diags)
}

// printDiags prints diagnostics of a test file, of a run when r is set.
func (tr *testRunner) printDiags(f *testFile, r *testRun, diags hcl.Diagnostics) {
	m := tr.m
	if m.view == nil {
		m.diags(diags)
		return
	}
	extra := map[string]any{"@testfile": f.Path}
	if r != nil {
		extra["@testrun"] = r.Name
	}
	for _, d := range jsonDiagnostics(m.relDiags(diags)) {
		m.view.Diagnostic(d, extra)
	}
}

// worseStatus returns the worse of two statuses: error, fail, pass, skip.
func worseStatus(a, b string) string {
	rank := map[string]int{jsonview.StatusSkip: 0, jsonview.StatusPass: 1, jsonview.StatusFail: 2, jsonview.StatusError: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func hasResources(s *state.State) bool {
	for _, r := range s.Resources {
		if len(r.Instances) > 0 && r.Mode != state.ModeData {
			return true
		}
	}
	return false
}

// runOne runs one run block against st, recording its outcome in rr, and
// returns the state after it and the variables it ran with (nil when they
// could not be had).
func (tr *testRunner) runOne(ctx context.Context, f *testFile, r *testRun, st *state.State, runOutputs map[string]cty.Value, rr *testRunResult) (*state.State, map[string]cty.Value) {
	m := tr.m
	fail := func(status, message string, diags hcl.Diagnostics) {
		rr.status, rr.message = status, message
		rr.diags = append(rr.diags, diags...)
	}
	vars, diags := tr.runVariables(f, r, runOutputs)
	diags, missing := expectedFailures(tr.cfg, r, diags)
	if diags.HasErrors() {
		fail(jsonview.StatusError, "the run's variables are not valid", diags)
		return st, nil
	}
	if nv := len(expectedOf(r, "var")); nv > 0 && len(missing) < nv {
		// An expected validation failed: nothing is planned, and that
		// is the test's point.
		rr.diags = append(rr.diags, diags...)
		if len(missing) > 0 {
			fail(jsonview.StatusFail, "an expected failure did not happen", missing)
			return st, vars
		}
		rr.status = jsonview.StatusPass
		return st, vars
	}
	rr.diags = append(rr.diags, diags...)
	eng := m.engine(tr.cfg, vars, tr.sea, planner.NopHooks{})
	defer eng.Close()
	p, pd := eng.Plan(ctx, st, planner.PlanOptions{Mode: planner.NormalMode, Refresh: true, Parallelism: 10})
	if pd.HasErrors() {
		fail(jsonview.StatusError, "the plan failed", pd)
		return st, vars
	}
	rr.diags = append(rr.diags, pd...)
	if d := tr.takesOwnAddress(p, r); d != nil {
		fail(jsonview.StatusError, "the run would create a resource of the working directory's state", hcl.Diagnostics{d})
		return st, vars
	}
	if len(missing) > 0 {
		fail(jsonview.StatusFail, "an expected failure did not happen", missing)
		return st, vars
	}
	var ectx *hcl.EvalContext
	var res *planner.ApplyResult
	if r.Command == testApply {
		w := &memStateWriter{last: st}
		var ad hcl.Diagnostics
		res, ad = eng.Apply(ctx, p, planner.ApplyOptions{Stop: tr.stop, Writer: w})
		if res != nil && res.State != nil {
			st = res.State
		} else {
			st = w.last
		}
		if res == nil || res.Stopped || ad.HasErrors() {
			if res != nil && res.Stopped {
				ad = append(ad, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Run interrupted", Detail: fmt.Sprintf("The apply stopped: %d changes were not started.", len(res.NotAttempted))})
			}
			fail(jsonview.StatusError, "the apply failed", ad)
			return st, vars
		}
		rr.diags = append(rr.diags, unseen(ad, pd)...)
		ectx = tr.stateContext(st, vars, runOutputs)
	} else {
		ectx = tr.planContext(p, vars, runOutputs)
	}
	checks := p.Checks
	if r.Command == testApply {
		checks = res.Checks
	}
	var cd hcl.Diagnostics
	rr.diags, cd = expectedCheckFailures(tr.cfg, r, checks, rr.diags)
	if cd.HasErrors() {
		fail(jsonview.StatusFail, "an expected failure did not happen", cd)
		return st, vars
	}
	outputs := ectx.Variables["output"]
	failed := 0
	var ad hcl.Diagnostics
	for _, a := range r.Asserts {
		if d := checkAssert(a, ectx, r.Command == testPlan); d != nil {
			ad = append(ad, d)
			if d.Severity == hcl.DiagError {
				failed++
			}
		}
	}
	runOutputs[r.Name] = outputs
	if failed > 0 {
		fail(jsonview.StatusFail, fmt.Sprintf("%d of %d assertions failed", failed, len(r.Asserts)), ad)
		return st, vars
	}
	rr.status = jsonview.StatusPass
	return st, vars
}

// takesOwnAddress refuses a plan that creates an instance the working
// directory's state manages: a local pool is named after its address, and
// the test would start, then destroy, a pool of that name.
func (tr *testRunner) takesOwnAddress(p *planner.Plan, r *testRun) *hcl.Diagnostic {
	for _, c := range p.Changes {
		if c.Action != planner.Create || !tr.managed[c.Addr.String()] {
			continue
		}
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Test would take a managed resource's name",
			Detail:  fmt.Sprintf("Run %q would create %s, which the working directory's own state manages: the test's pool would take the name of the one that runs, and its clean-up would stop it. Run the tests in a working directory with no state of its own, or destroy that state first.", r.Name, c.Addr),
			Subject: r.DeclRange.Ptr()}
	}
	return nil
}

// runVariables computes a run's variables: the file's variables block,
// then the run's, over the command line's -var and -var-file, over the
// configuration's variable files, environment and defaults; then the
// variables' validations. Diagnostics about a test value are at its
// expression in the test file.
func (tr *testRunner) runVariables(f *testFile, r *testRun, runOutputs map[string]cty.Value) (map[string]cty.Value, hcl.Diagnostics) {
	ectx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"run": cty.ObjectVal(runOutputs)},
		Functions: funcs.Functions(tr.cfg.Dir),
	}
	exprs := map[string]*hcl.Attribute{}
	for name, a := range f.Variables {
		exprs[name] = a
	}
	for name, a := range r.Variables {
		exprs[name] = a
	}
	names := make([]string, 0, len(exprs))
	for n := range exprs {
		names = append(names, n)
	}
	sort.Strings(names)
	var diags hcl.Diagnostics
	type span struct {
		start, end int
		rng        hcl.Range
	}
	var spans []span
	var src []byte
	for _, name := range names {
		a := exprs[name]
		if _, ok := tr.cfg.Variables[name]; !ok {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Value for undeclared variable",
				Detail: fmt.Sprintf("The test sets a variable named %q, but the configuration does not declare a variable of that name.", name), Subject: a.NameRange.Ptr()})
			continue
		}
		v, d := a.Expr.Value(ectx)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if !v.IsWhollyKnown() {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown variable value",
				Detail: fmt.Sprintf("The value of %s is not known: it refers to something a plan does not know yet.", name), Subject: a.Expr.Range().Ptr()})
			continue
		}
		v, _ = v.UnmarkDeep()
		before := len(src)
		line := hclwrite.NewEmptyFile()
		line.Body().SetAttributeValue(name, v)
		src = append(src, line.Bytes()...)
		spans = append(spans, span{before, len(src), a.Expr.Range()})
	}
	if diags.HasErrors() {
		return nil, diags
	}
	args := append([]config.VarArg{}, tr.cliVars...)
	var tmpName string
	if len(src) > 0 {
		tmp, err := os.CreateTemp("", "pondtest-*.pondvars")
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot pass the test's variables", Detail: err.Error()}}
		}
		tmpName = tmp.Name()
		defer os.Remove(tmpName)
		_, err = tmp.Write(src)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot pass the test's variables", Detail: err.Error()}}
		}
		args = append(args, config.VarArg{File: tmpName})
	}
	vars, d := config.CollectVariables(tr.cfg, config.VarOptions{Environ: tr.m.env, Args: args})
	delete(tr.cfg.Files, tmpName)
	// What CollectVariables says of the temporary file, it says of the
	// test's expressions.
	for _, diag := range d {
		if diag.Subject != nil && diag.Subject.Filename == tmpName {
			for _, s := range spans {
				if diag.Subject.Start.Byte >= s.start && diag.Subject.Start.Byte < s.end {
					rng := s.rng
					diag.Subject = &rng
					break
				}
			}
		}
		if tmpName != "" {
			diag.Detail = strings.ReplaceAll(diag.Detail, tmpName, "the test file "+f.Path)
		}
	}
	return vars, append(diags, d...)
}

// expectedFailures takes out of diags the validation failures of the
// variables run expects to fail, and returns the rest and a diagnostic for
// each expected failure that did not happen.
func expectedFailures(cfg *config.Config, r *testRun, diags hcl.Diagnostics) (hcl.Diagnostics, hcl.Diagnostics) {
	if len(r.ExpectFailures) == 0 {
		return diags, nil
	}
	vs := expectedOf(r, "var")
	if len(vs) == 0 {
		return diags, nil
	}
	expected := map[string]hcl.Traversal{}
	for _, t := range vs {
		expected[t[1].(hcl.TraverseAttr).Name] = t
	}
	happened := map[string]bool{}
	var rest hcl.Diagnostics
	for _, d := range diags {
		if name, ok := validationOf(cfg, d); ok && expected[name] != nil {
			happened[name] = true
			continue
		}
		rest = append(rest, d)
	}
	var missing hcl.Diagnostics
	for _, t := range vs {
		name := t[1].(hcl.TraverseAttr).Name
		if cfg.Variables[name] == nil {
			rest = append(rest, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Reference to undeclared input variable",
				Detail: fmt.Sprintf("expect_failures names var.%s, which the configuration does not declare.", name), Subject: t.SourceRange().Ptr()})
			continue
		}
		if !happened[name] {
			missing = append(missing, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing expected failure",
				Detail: fmt.Sprintf("The run expected the validation of var.%s to fail, but it did not.", name), Subject: t.SourceRange().Ptr()})
		}
	}
	return rest, missing
}

// expectedOf is the traversals of run's expect_failures rooted at root
// (var or check).
func expectedOf(r *testRun, root string) []hcl.Traversal {
	var out []hcl.Traversal
	for _, t := range r.ExpectFailures {
		if t.RootName() == root {
			out = append(out, t)
		}
	}
	return out
}

// expectedCheckFailures takes out of diags the warnings of the failing
// check blocks run expects to fail (check.NAME), and returns the rest and
// an error for each expected check that did not fail (or names no check
// block). checks are the check blocks' outcomes after the run's plan or
// apply.
func expectedCheckFailures(cfg *config.Config, r *testRun, checks []planner.CheckResult, diags hcl.Diagnostics) (hcl.Diagnostics, hcl.Diagnostics) {
	cs := expectedOf(r, "check")
	if len(cs) == 0 {
		return diags, nil
	}
	status := map[string]planner.CheckStatus{}
	for _, c := range checks {
		status[c.Name] = c.Status
	}
	declared := map[string]bool{}
	for _, c := range cfg.Checks {
		declared[c.Name] = true
	}
	failed := map[string]bool{}
	var errs hcl.Diagnostics
	for _, t := range cs {
		name := t[1].(hcl.TraverseAttr).Name
		switch {
		case !declared[name]:
			errs = append(errs, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Reference to undeclared check block",
				Detail: fmt.Sprintf("expect_failures names check.%s, which the configuration does not declare.", name), Subject: t.SourceRange().Ptr()})
		case status[name] == planner.CheckFail:
			failed[name] = true
		default:
			errs = append(errs, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing expected failure",
				Detail: fmt.Sprintf("The run expected check.%s to fail, but it did not (its status is %s).", name, status[name]), Subject: t.SourceRange().Ptr()})
		}
	}
	var rest hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning && d.Summary == "Check block assertion failed" && failed[checkOfWarning(d.Detail)] {
			continue
		}
		rest = append(rest, d)
	}
	return rest, errs
}

// checkOfWarning is the check block a failed assertion's warning names
// ("(check \"NAME\", file:line)" at its end), or "".
func checkOfWarning(detail string) string {
	i := strings.LastIndex(detail, "(check ")
	if i < 0 {
		return ""
	}
	name, err := strconv.QuotedPrefix(detail[i+len("(check "):])
	if err != nil {
		return ""
	}
	name, err = strconv.Unquote(name)
	if err != nil {
		return ""
	}
	return name
}

// validationOf says which variable's validation rule d reports failing.
func validationOf(cfg *config.Config, d *hcl.Diagnostic) (string, bool) {
	if d.Severity != hcl.DiagError || d.Expression == nil {
		return "", false
	}
	for name, v := range cfg.Variables {
		for _, val := range v.Validations {
			if val.Condition == d.Expression {
				return name, true
			}
		}
	}
	return "", false
}

// checkAssert evaluates an assert block: nil when it holds, else the
// error that says why not.
func checkAssert(a *testAssert, ectx *hcl.EvalContext, plan bool) *hcl.Diagnostic {
	v, diags := a.Condition.Value(ectx)
	if diags.HasErrors() {
		d := *diags[0]
		for _, x := range diags {
			if x.Severity == hcl.DiagError {
				d = *x
				break
			}
		}
		return &d
	}
	v, _ = v.UnmarkDeep()
	if !v.IsKnown() {
		detail := "The condition could not be evaluated: its value is not known."
		if plan {
			detail = "The condition depends on values known only after apply: use command = apply in this run, or assert on what the plan knows."
		}
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown condition value", Detail: detail, Subject: a.Condition.Range().Ptr(), Expression: a.Condition, EvalContext: ectx}
	}
	b, err := convert.Convert(v, cty.Bool)
	if err != nil || b.IsNull() {
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid condition result", Detail: "The condition of an assert must be true or false.", Subject: a.Condition.Range().Ptr(), Expression: a.Condition, EvalContext: ectx}
	}
	if b.True() {
		return nil
	}
	msg := "The assertion failed."
	if mv, d := a.ErrorMessage.Value(ectx); !d.HasErrors() {
		if s, err := convert.Convert(mv, cty.String); err == nil && s.IsKnown() && !s.IsNull() {
			if s.IsMarked() {
				msg = "The error message refers to a sensitive value."
			} else {
				msg = s.AsString()
			}
		}
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Test assertion failed", Detail: msg, Subject: a.Condition.Range().Ptr(), Expression: a.Condition, EvalContext: ectx}
}

// planContext is what a plan run's asserts see: the planned values of
// the resources (unknown where only the apply tells), the data sources
// read, the planned outputs, the variables and the earlier runs' outputs.
func (tr *testRunner) planContext(p *planner.Plan, vars map[string]cty.Value, runOutputs map[string]cty.Value) *hcl.EvalContext {
	insts := map[state.Address]cty.Value{}
	for _, c := range p.Changes {
		if c.Action == planner.Delete || c.Action == planner.Forget {
			continue
		}
		_, after := c.Marked()
		insts[c.Addr] = after
	}
	if p.Refreshed != nil {
		for _, r := range p.Refreshed.Resources {
			if r.Mode != state.ModeData {
				continue
			}
			for _, inst := range r.Instances {
				insts[state.Address{Mode: r.Mode, Type: r.Type, Name: r.Name, Key: inst.IndexKey}] = tr.m.instanceValue(r, inst)
			}
		}
	}
	outs := map[string]cty.Value{}
	for _, o := range p.OutputChanges {
		if o.Action == planner.Delete {
			continue
		}
		v := o.After
		if o.Sensitive {
			v = v.Mark(marks.Sensitive)
		}
		outs[o.Name] = v
	}
	return tr.evalContext(insts, outs, vars, runOutputs)
}

// stateContext is what an apply run's asserts see: the state after it.
func (tr *testRunner) stateContext(st *state.State, vars map[string]cty.Value, runOutputs map[string]cty.Value) *hcl.EvalContext {
	insts := map[state.Address]cty.Value{}
	for _, r := range st.Resources {
		for _, inst := range r.Instances {
			insts[state.Address{Mode: r.Mode, Type: r.Type, Name: r.Name, Key: inst.IndexKey}] = tr.m.instanceValue(r, inst)
		}
	}
	outs := map[string]cty.Value{}
	for name, o := range st.Outputs {
		v, err := decodeOutputValue(o)
		if err != nil {
			v = cty.DynamicVal
		}
		if o.Sensitive {
			v = v.Mark(marks.Sensitive)
		}
		outs[name] = v
	}
	return tr.evalContext(insts, outs, vars, runOutputs)
}

// evalContext makes the context of asserts: var, output, run, data and
// each resource type, a resource being its value, or a tuple (count) or
// an object (for_each) of its instances' values.
func (tr *testRunner) evalContext(insts map[state.Address]cty.Value, outs, vars, runOutputs map[string]cty.Value) *hcl.EvalContext {
	type group struct {
		mode, typ, name string
		byKey           map[any]cty.Value
	}
	groups := map[string]*group{}
	for addr, v := range insts {
		k := addr.ResourceAddress().String()
		g := groups[k]
		if g == nil {
			g = &group{mode: addr.Mode, typ: addr.Type, name: addr.Name, byKey: map[any]cty.Value{}}
			groups[k] = g
		}
		g.byKey[addr.Key] = v
	}
	managed := map[string]map[string]cty.Value{}
	data := map[string]map[string]cty.Value{}
	for _, g := range groups {
		var v cty.Value
		if single, ok := g.byKey[nil]; ok && len(g.byKey) == 1 {
			v = single
		} else {
			ints, strs := []int{}, map[string]cty.Value{}
			for k, iv := range g.byKey {
				switch k := k.(type) {
				case int:
					ints = append(ints, k)
				case string:
					strs[k] = iv
				}
			}
			if len(strs) > 0 {
				v = cty.ObjectVal(strs)
			} else {
				sort.Ints(ints)
				elems := make([]cty.Value, 0, len(ints))
				for _, i := range ints {
					elems = append(elems, g.byKey[i])
				}
				v = cty.TupleVal(elems)
			}
		}
		into := managed
		if g.mode == state.ModeData {
			into = data
		}
		if into[g.typ] == nil {
			into[g.typ] = map[string]cty.Value{}
		}
		into[g.typ][g.name] = v
	}
	markedVars := map[string]cty.Value{}
	for name, v := range vars {
		if d := tr.cfg.Variables[name]; d != nil && d.Sensitive {
			v = v.Mark(marks.Sensitive)
		}
		markedVars[name] = v
	}
	top := map[string]cty.Value{
		"var":    cty.ObjectVal(markedVars),
		"output": cty.ObjectVal(outs),
		"run":    cty.ObjectVal(runOutputs),
	}
	dataObj := map[string]cty.Value{}
	for typ, byName := range data {
		dataObj[typ] = cty.ObjectVal(byName)
	}
	top["data"] = cty.ObjectVal(dataObj)
	for typ, byName := range managed {
		top[typ] = cty.ObjectVal(byName)
	}
	return &hcl.EvalContext{Variables: top, Functions: funcs.Functions(tr.cfg.Dir)}
}

// cleanUp destroys what the file's runs applied, with the variables of
// the last run that applied, and returns the addresses left in the state.
// A state left over is saved in the working directory, for a manual
// clean-up.
func (tr *testRunner) cleanUp(ctx context.Context, st *state.State, vars map[string]cty.Value) ([]string, hcl.Diagnostics) {
	if !hasResources(st) {
		return nil, nil
	}
	if vars == nil {
		vars, _ = config.CollectVariables(tr.cfg, config.VarOptions{Environ: tr.m.env, Args: tr.cliVars})
	}
	eng := tr.m.engine(tr.cfg, vars, tr.sea, planner.NopHooks{})
	defer eng.Close()
	var diags hcl.Diagnostics
	p, pd := eng.Plan(ctx, st, planner.PlanOptions{Mode: planner.DestroyMode, Refresh: true, Parallelism: 10})
	diags = append(diags, pd...)
	if !pd.HasErrors() {
		w := &memStateWriter{last: st}
		// The clean-up runs even after an interrupt: only a second one
		// (which cancels ctx) stops it.
		res, ad := eng.Apply(ctx, p, planner.ApplyOptions{Writer: w})
		diags = append(diags, ad...)
		if res != nil && res.State != nil {
			st = res.State
		} else {
			st = w.last
		}
	}
	if !hasResources(st) {
		return nil, diags
	}
	var left []string
	for _, r := range st.Resources {
		if r.Mode == state.ModeData {
			continue
		}
		for _, inst := range r.Instances {
			left = append(left, state.Address{Mode: r.Mode, Type: r.Type, Name: r.Name, Key: inst.IndexKey}.String())
		}
	}
	if data, err := state.Encode(st); err == nil {
		path := filepath.Join(tr.m.dir, erroredTestState)
		if err := os.WriteFile(path, data, 0o600); err == nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Failed to clean up after tests",
				Detail: fmt.Sprintf("The state of what is left is saved in %s. When this working directory has no state of its own, destroy what is left with \"pondctl state push %[1]s\" then \"pondctl destroy\".", tr.m.relPath(path))})
		}
	}
	return left, diags
}

// testSummary counts the runs of every file.
func testSummary(results []*testFileResult) jsonview.TestSummary {
	s := jsonview.TestSummary{Status: jsonview.StatusSkip}
	for _, f := range results {
		for _, r := range f.runs {
			switch r.status {
			case jsonview.StatusPass:
				s.Passed++
			case jsonview.StatusFail:
				s.Failed++
			case jsonview.StatusError:
				s.Errored++
			default:
				s.Skipped++
			}
		}
		s.Status = worseStatus(s.Status, f.status)
	}
	if len(results) == 0 {
		s.Status = jsonview.StatusPass
	}
	return s
}
