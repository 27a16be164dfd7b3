package cli

import (
	"github.com/hashicorp/hcl/v2"

	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/cmd/internal/ui/jsonview"
	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/state"
)

// interruptible returns a stop channel closed on the first interrupt and a
// context cancelled on the second.
func (m *meta) interruptible(ctx context.Context) (context.Context, <-chan struct{}, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case <-sigs:
				n++
				if n == 1 {
					fmt.Fprintln(m.stderr, "\nInterrupt received.\nPlease wait for pond to exit or data loss may occur.\nGracefully shutting down...")
					close(stop)
				} else {
					fmt.Fprintln(m.stderr, "\nTwo interrupts received. Exiting immediately. Note that data loss may have occurred.")
					cancel()
					return
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, stop, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

// cmdApply implements apply, destroy (op "destroy") and refresh: it reads
// the flags, the configuration and the variables (or a saved plan), locks
// the state, plans, asks, applies and reports.
func (m *meta) cmdApply(ctx context.Context, args []string, op string) int {
	pf, planPath, ok := m.applyFlags(args, op)
	if !ok {
		return 1
	}
	ctx, stop, release := m.interruptible(ctx)
	defer release()

	cfg, ok := m.loadConfig()
	if !ok {
		return 1
	}
	if op == "apply" && !pf.destroy && planPath == "" && m.noConfig(cfg, "Applying", "pondctl destroy") {
		return 1
	}
	saved, values, ok := m.applyInputs(cfg, planPath, &pf)
	if !ok {
		return 1
	}
	b, prior, unlock, ok := m.lockedState(ctx, cfg, pf.lf, "OperationTypeApply")
	if !ok {
		return 1
	}
	defer unlock()
	if !m.savedPlanFitsState(saved, prior, planPath) {
		return 1
	}
	sea := m.seaAddr(pf.sea, cfg)
	hooks := newUIHooks(m.stdout, m.col(), m.view)
	eng := m.engine(cfg, values, sea, hooks)
	defer eng.Close()
	p, planDiags, ok := m.applyPlan(ctx, eng, prior, &pf, saved, planPath, hooks)
	if !ok {
		return 1
	}
	if !p.HasChanges() && op != "refresh" {
		return m.applyNoChanges(ctx, eng, p, op, &pf, stop, b, prior)
	}
	if saved == nil && !pf.autoApprove && !m.confirmApply(&pf) {
		return 1
	}
	return m.applyChanges(ctx, eng, p, op, &pf, stop, b, prior, planDiags, hooks)
}

// applyFlags parses the flags of apply, destroy or refresh, and the saved
// plan's path that apply may name.
func (m *meta) applyFlags(args []string, op string) (planFlags, string, bool) {
	var pf planFlags
	usage := op + " [options]"
	if op == "apply" {
		usage = "apply [options] [PLAN]"
	}
	fs := m.newFlagSet(op, usage)
	pf.register(fs, op)
	if err := fs.Parse(args); err != nil {
		return pf, "", false
	}
	switch op {
	case "destroy":
		pf.destroy = true
	case "refresh":
		pf.refreshOnly, pf.autoApprove = true, true
	}
	if pf.json {
		m.startJSON()
	}
	if len(pf.targets) > 0 && len(pf.excludes) > 0 {
		m.errorf("Invalid combination of arguments: -target and -exclude cannot be used together; use one or the other")
		return pf, "", false
	}
	if fs.NArg() > 1 || (fs.NArg() == 1 && op != "apply") {
		m.errorf("%s: unexpected arguments %q", op, strings.Join(fs.Args(), " "))
		return pf, "", false
	}
	if pf.json && !pf.autoApprove && fs.NArg() == 0 {
		m.errorf("Plan file or auto-approve required: pondctl cannot ask for approval when -json is set; apply a saved plan file, or add -auto-approve")
		return pf, "", false
	}
	return pf, fs.Arg(0), true
}

// applyInputs returns the variables' values: those of the saved plan at
// planPath, whose options then replace pf's, or else those the flags,
// files and environment give.
func (m *meta) applyInputs(cfg *config.Config, planPath string, pf *planFlags) (*savedPlan, map[string]cty.Value, bool) {
	if planPath == "" {
		values, ok := m.collectVars(cfg, &pf.vars, pf.input)
		return nil, values, ok
	}
	s, values, err := readPlanFile(m.path(planPath))
	if err != nil {
		m.fail("Failed to read plan file", err)
		return nil, nil, false
	}
	if s.ConfigHash != configHash(cfg) {
		m.errorf("Saved plan is stale: the configuration has changed since %s was made; run \"pondctl plan\" again", planPath)
		return nil, nil, false
	}
	if !m.sensitiveVars(cfg, s, planPath, values, &pf.vars, pf.input) {
		return nil, nil, false
	}
	pf.targets, pf.excludes, pf.replace, pf.refresh = s.Targets, s.Excludes, s.Replace, s.Refresh
	pf.destroy = s.Mode == planner.DestroyMode
	pf.refreshOnly = s.Mode == planner.RefreshOnlyMode
	if pf.sea == "" {
		pf.sea = s.Sea
	}
	return s, values, true
}

// savedPlanFitsState says whether the saved plan, if any, was made
// against the state as it is now: the same lineage and serial.
func (m *meta) savedPlanFitsState(saved *savedPlan, prior *state.State, planPath string) bool {
	if saved == nil {
		return true
	}
	if prior.Serial == 0 && saved.Serial == 0 {
		// Nothing was stored when the plan was made, nor now: the plan's
		// lineage becomes the state's.
		prior.Lineage = saved.Lineage
	}
	if prior.Lineage != saved.Lineage {
		m.errorf("Saved plan is for another state: %s was made for state lineage %s, but the state is lineage %s; run \"pondctl plan\" again", planPath, saved.Lineage, prior.Lineage)
		return false
	}
	if prior.Serial != saved.Serial {
		m.errorf("Saved plan is stale: the state changed since %s was made (serial %d, now %d); run \"pondctl plan\" again", planPath, saved.Serial, prior.Serial)
		return false
	}
	return true
}

// applyPlan plans the changes and shows them, or checks that they are
// still those of the saved plan, then shows the plan's warnings, before
// the question, so that they count in the answer. It returns the plan and
// its diagnostics.
func (m *meta) applyPlan(ctx context.Context, eng *planner.Engine, prior *state.State, pf *planFlags, saved *savedPlan, planPath string, hooks *uiHooks) (*planner.Plan, hcl.Diagnostics, bool) {
	p, diags := eng.Plan(ctx, prior, pf.options())
	if diags.HasErrors() {
		m.diags(diags)
		return nil, nil, false
	}
	if saved != nil {
		if d := diffActions(saved.Actions, planActions(p)); d != "" {
			m.errorf("Saved plan is stale: the infrastructure changed since %s was made:\n%s\nRun \"pondctl plan\" again.", planPath, d)
			return nil, nil, false
		}
	}
	if m.view != nil {
		streamPlan(m.view, p)
	} else if saved == nil {
		renderPlan(m.stdout, p, m.col())
	}
	m.warnings(diags, hooks)
	return p, diags, true
}

// applyNoChanges finishes an apply or destroy whose plan changes nothing.
func (m *meta) applyNoChanges(ctx context.Context, eng *planner.Engine, p *planner.Plan, op string, pf *planFlags, stop <-chan struct{}, b state.Backend, prior *state.State) int {
	if op == "destroy" {
		if m.view != nil {
			m.view.ChangeSummary(jsonview.Summary{Operation: "destroy"})
			return 0
		}
		fmt.Fprintf(m.stdout, "\n%s\n", m.col().bold(m.col().green("Destroy complete! Resources: 0 destroyed.")))
		return 0
	}
	st := prior
	if len(p.Drift) > 0 && !pf.destroy {
		// Nothing to do, but the state takes what the refresh
		// found changed outside of pond, as a refresh would: it
		// says what exists (glideins that replaced those ended,
		// adopted by the provider), and the next plan starts there.
		persister, ok := m.persister(historyCommand(op, pf), b, prior, p.HistoryHints())
		if !ok {
			return 1
		}
		res, diags := eng.Apply(ctx, p, planner.ApplyOptions{Stop: stop, Writer: persister})
		m.recordWritten(ctx, persister, prior)
		if res == nil || diags.HasErrors() {
			m.diags(diags)
			return 1
		}
		st = res.State
	}
	if m.view != nil {
		m.view.ChangeSummary(jsonview.Summary{Operation: "apply"})
		streamStateOutputs(m.view, st)
		return 0
	}
	fmt.Fprintf(m.stdout, "\n%s\n", m.col().bold(m.col().green("Apply complete! Resources: 0 added, 0 changed, 0 destroyed.")))
	m.printOutputs(st)
	return 0
}

// confirmApply asks whether to perform the plan's changes.
func (m *meta) confirmApply(pf *planFlags) bool {
	if !pf.input {
		m.errorf("No confirmation: apply needs -auto-approve when it cannot ask (-input=false or no terminal)")
		return false
	}
	q, detail := "Do you want to perform these actions?", "Pond will perform the actions described above."
	if pf.destroy {
		q, detail = "Do you really want to destroy all resources?", "Pond will destroy all your managed infrastructure, as shown above. There is no undo."
	}
	if !m.confirm(q, detail) {
		fmt.Fprintln(m.stderr, "Apply cancelled.")
		return false
	}
	return true
}

// applyChanges applies the plan, storing the state as it goes, and
// reports what changed and the warnings the plan did not show.
func (m *meta) applyChanges(ctx context.Context, eng *planner.Engine, p *planner.Plan, op string, pf *planFlags, stop <-chan struct{}, b state.Backend, prior *state.State, planDiags hcl.Diagnostics, hooks *uiHooks) int {
	persister, ok := m.persister(historyCommand(op, pf), b, prior, p.HistoryHints())
	if !ok {
		return 1
	}
	// A pool the command destroys takes the record before it goes; every
	// pool it changed, the record the state keeps, once written (even by
	// an apply that failed part way).
	m.recordGoing(ctx, p, prior, persister.history)
	res, diags := eng.Apply(ctx, p, planner.ApplyOptions{Stop: stop, Writer: persister})
	m.recordWritten(ctx, persister, prior)
	if res == nil || res.Stopped || diags.HasErrors() {
		m.diags(diags)
		if res != nil && res.Stopped {
			fmt.Fprintf(m.stderr, "\nStopped: %d changes were not started.\n", len(res.NotAttempted))
		}
		return 1
	}
	c := m.col()
	switch {
	case m.view != nil && (op == "destroy" || pf.destroy):
		m.view.ChangeSummary(jsonview.Summary{Remove: res.Destroyed, Operation: "destroy"})
	case m.view != nil:
		m.view.ChangeSummary(jsonview.Summary{Add: res.Added, Change: res.Changed, Remove: res.Destroyed, Operation: "apply"})
		streamStateOutputs(m.view, res.State)
	case op == "destroy" || pf.destroy:
		fmt.Fprintf(m.stdout, "\n%s\n", c.bold(c.green(fmt.Sprintf("Destroy complete! Resources: %d destroyed.", res.Destroyed))))
	default:
		forgot := ""
		if res.Forgotten > 0 {
			forgot = fmt.Sprintf(", %d forgotten", res.Forgotten)
		}
		fmt.Fprintf(m.stdout, "\n%s\n", c.bold(c.green(fmt.Sprintf("Apply complete! Resources: %s%d added, %d changed, %d destroyed%s.", imported(res.Imported), res.Added, res.Changed, res.Destroyed, forgot))))
		m.printOutputs(res.State)
	}
	// The apply plans each change again: the warnings the plan showed
	// above are not shown twice.
	m.warnings(unseen(diags, planDiags), hooks)
	return 0
}

// historyCommand names an apply, destroy or refresh in the state's
// history: apply -destroy and apply -refresh-only say so.
func historyCommand(op string, pf *planFlags) string {
	switch {
	case op != "apply":
		return op
	case pf.destroy:
		return "apply -destroy"
	case pf.refreshOnly:
		return "apply -refresh-only"
	}
	return op
}

// unseen returns the diagnostics of d that shown has not (the same
// severity, summary, detail and place), each once.
func unseen(d, shown hcl.Diagnostics) hcl.Diagnostics {
	key := func(x *hcl.Diagnostic) string {
		k := fmt.Sprintf("%d\x00%s\x00%s", x.Severity, x.Summary, x.Detail)
		if x.Subject != nil {
			k += "\x00" + x.Subject.String()
		}
		return k
	}
	seen := make(map[string]bool, len(shown))
	for _, x := range shown {
		seen[key(x)] = true
	}
	var out hcl.Diagnostics
	for _, x := range d {
		if k := key(x); !seen[k] {
			seen[k] = true
			out = append(out, x)
		}
	}
	return out
}
