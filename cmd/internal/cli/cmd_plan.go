package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/pond-htc/pond/planner"
)

// planFlags are the flags plan, apply, destroy and refresh share.
type planFlags struct {
	vars        varFlags
	lf          lockFlags
	targets     stringList
	excludes    stringList
	replace     stringList
	refresh     bool
	refreshOnly bool
	destroy     bool
	detailed    bool
	json        bool
	input       bool
	parallelism int
	out         string
	genConfig   string
	autoApprove bool
	sea         string
}

func (pf *planFlags) register(fs *flag.FlagSet, op string) {
	pf.vars.register(fs)
	pf.lf.register(fs)
	fs.Var(&pf.targets, "target", "limit the operation to this resource and its dependencies (repeatable)")
	fs.Var(&pf.excludes, "exclude", "leave out this resource and what depends on it (repeatable; not with -target)")
	fs.BoolVar(&pf.refresh, "refresh", true, "read the current state of every resource first")
	fs.BoolVar(&pf.json, "json", false, "print the machine-readable UI: one JSON message a line")
	fs.BoolVar(&pf.input, "input", true, "ask for missing variable values")
	fs.IntVar(&pf.parallelism, "parallelism", 10, "how many resource operations to run at once")
	fs.StringVar(&pf.sea, "sea", "", "API address of an agent in the sea (or POND_SEA_ADDR)")
	if op != "destroy" && op != "refresh" {
		fs.Var(&pf.replace, "replace", "replace this resource instance even if it is unchanged (repeatable)")
		fs.BoolVar(&pf.refreshOnly, "refresh-only", false, "only update the state to match the real infrastructure")
		fs.BoolVar(&pf.destroy, "destroy", false, "plan to destroy every resource")
	}
	if op == "plan" {
		fs.BoolVar(&pf.detailed, "detailed-exitcode", false, "exit 0 with no changes, 1 on error, 2 with changes")
		fs.StringVar(&pf.out, "out", "", "save the plan to this file for a later apply")
		fs.StringVar(&pf.genConfig, "generate-config-out", "", "write resource blocks for the import blocks' targets that have none to this new *.pond.hcl file")
	}
	if op == "apply" || op == "destroy" || op == "refresh" {
		fs.BoolVar(&pf.autoApprove, "auto-approve", false, "do not ask for confirmation")
	}
}

func (pf *planFlags) options() planner.PlanOptions {
	mode := planner.NormalMode
	switch {
	case pf.destroy:
		mode = planner.DestroyMode
	case pf.refreshOnly:
		mode = planner.RefreshOnlyMode
	}
	return planner.PlanOptions{Mode: mode, Targets: pf.targets, Excludes: pf.excludes, Replace: pf.replace, Refresh: pf.refresh || pf.refreshOnly, Parallelism: pf.parallelism}
}

func (m *meta) cmdPlan(ctx context.Context, args []string) int {
	var pf planFlags
	fs := m.newFlagSet("plan", "plan [options]")
	pf.register(fs, "plan")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() > 0 {
		return m.errorf("plan takes no arguments, got %q", strings.Join(fs.Args(), " "))
	}
	if pf.json {
		m.startJSON()
	}
	if pf.destroy && pf.refreshOnly {
		return m.errorf("-destroy and -refresh-only cannot be used together")
	}
	if len(pf.targets) > 0 && len(pf.excludes) > 0 {
		return m.errorf("Invalid combination of arguments: -target and -exclude cannot be used together; use one or the other")
	}
	ctx, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cfg, ok := m.loadConfig()
	if !ok {
		return 1
	}
	if !pf.destroy && m.noConfig(cfg, "Planning", "pondctl plan -destroy") {
		return 1
	}
	vars, ok := m.collectVars(cfg, &pf.vars, pf.input)
	if !ok {
		return 1
	}
	_, prior, unlock, ok := m.lockedState(ctx, cfg, pf.lf, "OperationTypePlan")
	if !ok {
		return 1
	}
	defer unlock()
	sea := m.seaAddr(pf.sea, cfg)
	if pf.genConfig != "" {
		if cfg, ok = m.generateImportConfig(ctx, cfg, vars, sea, prior, pf.genConfig, pf.json); !ok {
			return 1
		}
	}
	hooks := newUIHooks(m.stdout, m.col(), m.view)
	eng := m.engine(cfg, vars, sea, hooks)
	defer eng.Close()
	p, diags := eng.Plan(ctx, prior, pf.options())
	if diags.HasErrors() {
		m.diags(diags)
		return 1
	}
	if pf.json {
		// The machine-readable UI, as Terraform's plan -json prints it;
		// the plan document is pondctl show -json of the saved plan.
		streamPlan(m.view, p)
		m.diags(diags)
	} else {
		renderPlan(m.stdout, p, m.col())
		// Warnings come after the plan, as Terraform shows them.
		m.diags(diags)
	}
	if pf.out != "" {
		if err := writePlanFile(m.path(pf.out), p, cfg, vars, configHash(cfg), sea, m.hashKey(cfg)); err != nil {
			return m.fail("Failed to write plan file", err)
		}
		if !pf.json {
			fmt.Fprintf(m.stdout, "\n%s\n\nSaved the plan to: %s\n\nTo perform exactly these actions, run the following command to apply:\n    pondctl apply %q\n", strings.Repeat("─", 77), pf.out, pf.out)
		}
	} else if !pf.json && p.HasChanges() {
		fmt.Fprintf(m.stdout, "\n%s\n\nNote: You didn't use the -out option to save this plan, so pond can't guarantee to take exactly these actions if you run \"pondctl apply\" now.\n", strings.Repeat("─", 77))
	}
	if m.view != nil && m.view.Err() != nil {
		return 1
	}
	if pf.detailed && p.HasChanges() {
		return 2
	}
	return 0
}
