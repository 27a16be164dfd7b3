package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/state"
)

// planFlags are the flags plan, apply, destroy and refresh share.
type planFlags struct {
	vars        varFlags
	lf          lockFlags
	targets     stringList
	replace     stringList
	refresh     bool
	refreshOnly bool
	destroy     bool
	detailed    bool
	json        bool
	input       bool
	parallelism int
	out         string
	autoApprove bool
	sea         string
}

func (pf *planFlags) register(fs *flag.FlagSet, op string) {
	pf.vars.register(fs)
	pf.lf.register(fs)
	fs.Var(&pf.targets, "target", "limit the operation to this resource and its dependencies (repeatable)")
	fs.BoolVar(&pf.refresh, "refresh", true, "read the current state of every resource first")
	fs.BoolVar(&pf.json, "json", false, "print machine-readable JSON")
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
	return planner.PlanOptions{Mode: mode, Targets: pf.targets, Replace: pf.replace, Refresh: pf.refresh || pf.refreshOnly, Parallelism: pf.parallelism}
}

// newFlagSet returns a flag set that reports errors to stderr.
func (m *meta) newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.stderr)
	fs.Usage = func() {
		fmt.Fprintf(m.stderr, "Usage: pondctl %s\n\nOptions:\n", usage)
		fs.PrintDefaults()
	}
	fs.Var(noColorFlag{m}, "no-color", "print without colours")
	return fs
}

// noColorFlag is -no-color, which every command takes.
type noColorFlag struct{ m *meta }

func (f noColorFlag) String() string   { return "false" }
func (f noColorFlag) IsBoolFlag() bool { return true }
func (f noColorFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	if v {
		f.m.color = false
	}
	return nil
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
		m.color = false
	}
	if pf.destroy && pf.refreshOnly {
		return m.errorf("-destroy and -refresh-only cannot be used together")
	}
	ctx, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cfg, ok := m.loadConfig()
	if !ok {
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
	var hooks planner.Hooks = planner.NopHooks{}
	if !pf.json {
		hooks = newUIHooks(m.stdout, m.col(), false)
	}
	eng := m.engine(cfg, vars, sea, hooks)
	defer eng.Close()
	p, diags := eng.Plan(ctx, prior, pf.options())
	if m.diags(diags) {
		return 1
	}
	if pf.json {
		enc := json.NewEncoder(m.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(planJSON(p)); err != nil {
			return m.fail("Cannot print the plan", err)
		}
	} else {
		renderPlan(m.stdout, p, m.col())
	}
	if pf.out != "" {
		if err := writePlanFile(pf.out, p, vars, configHash(cfg), sea); err != nil {
			return m.fail("Failed to write plan file", err)
		}
		if !pf.json {
			fmt.Fprintf(m.stdout, "\n%s\n\nSaved the plan to: %s\n\nTo perform exactly these actions, run the following command to apply:\n    pondctl apply %q\n", strings.Repeat("─", 77), pf.out, pf.out)
		}
	} else if !pf.json && p.HasChanges() {
		fmt.Fprintf(m.stdout, "\n%s\n\nNote: You didn't use the -out option to save this plan, so pond can't guarantee to take exactly these actions if you run \"pondctl apply\" now.\n", strings.Repeat("─", 77))
	}
	if pf.detailed && p.HasChanges() {
		return 2
	}
	return 0
}

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

func (m *meta) confirm(question, detail string) bool {
	fmt.Fprintf(m.stdout, "\n%s\n  %s\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ", m.col().bold(question), detail)
	line, _ := bufio.NewReader(m.stdin).ReadString('\n')
	fmt.Fprintln(m.stdout)
	return strings.TrimSpace(line) == "yes"
}

// cmdApply implements apply, destroy (op "destroy") and refresh.
func (m *meta) cmdApply(ctx context.Context, args []string, op string) int {
	var pf planFlags
	usage := op + " [options]"
	if op == "apply" {
		usage = "apply [options] [PLAN]"
	}
	fs := m.newFlagSet(op, usage)
	pf.register(fs, op)
	if err := fs.Parse(args); err != nil {
		return 1
	}
	switch op {
	case "destroy":
		pf.destroy = true
	case "refresh":
		pf.refreshOnly, pf.autoApprove = true, true
	}
	if pf.json {
		m.color = false
	}
	if fs.NArg() > 1 || (fs.NArg() == 1 && op != "apply") {
		return m.errorf("%s: unexpected arguments %q", op, strings.Join(fs.Args(), " "))
	}
	planPath := fs.Arg(0)
	ctx, stop, release := m.interruptible(ctx)
	defer release()

	cfg, ok := m.loadConfig()
	if !ok {
		return 1
	}
	var (
		saved  *savedPlan
		values map[string]cty.Value
	)
	if planPath != "" {
		s, vv, err := readPlanFile(planPath)
		if err != nil {
			return m.fail("Failed to read plan file", err)
		}
		if s.ConfigHash != configHash(cfg) {
			return m.errorf("Saved plan is stale: the configuration has changed since %s was made; run \"pondctl plan\" again", planPath)
		}
		saved = s
		values = vv
		pf.targets, pf.replace, pf.refresh = s.Targets, s.Replace, s.Refresh
		pf.destroy = s.Mode == planner.DestroyMode
		pf.refreshOnly = s.Mode == planner.RefreshOnlyMode
		if pf.sea == "" {
			pf.sea = s.Sea
		}
	} else {
		values, ok = m.collectVars(cfg, &pf.vars, pf.input)
		if !ok {
			return 1
		}
	}
	b, prior, unlock, ok := m.lockedState(ctx, cfg, pf.lf, "OperationTypeApply")
	if !ok {
		return 1
	}
	defer unlock()
	if saved != nil && prior.Serial == 0 && saved.Serial == 0 {
		// Nothing was stored when the plan was made, nor now: the plan's
		// lineage becomes the state's.
		prior.Lineage = saved.Lineage
	}
	if saved != nil && (prior.Lineage != saved.Lineage || prior.Serial != saved.Serial) {
		return m.errorf("Saved plan is stale: the state changed since %s was made (serial %d, now %d); run \"pondctl plan\" again", planPath, saved.Serial, prior.Serial)
	}
	sea := m.seaAddr(pf.sea, cfg)
	hooks := newUIHooks(m.stdout, m.col(), pf.json)
	eng := m.engine(cfg, values, sea, hooks)
	defer eng.Close()
	p, diags := eng.Plan(ctx, prior, pf.options())
	if m.diags(diags) {
		return 1
	}
	if saved != nil {
		if d := diffActions(saved.Actions, planActions(p)); d != "" {
			return m.errorf("Saved plan is stale: the infrastructure changed since %s was made:\n%s\nRun \"pondctl plan\" again.", planPath, d)
		}
	} else if !pf.json {
		renderPlan(m.stdout, p, m.col())
	}
	if !p.HasChanges() && op != "refresh" {
		if op == "destroy" {
			fmt.Fprintf(m.stdout, "\n%s\n", m.col().bold(m.col().green("Destroy complete! Resources: 0 destroyed.")))
		} else {
			fmt.Fprintf(m.stdout, "\n%s\n", m.col().bold(m.col().green("Apply complete! Resources: 0 added, 0 changed, 0 destroyed.")))
			m.printOutputs(prior)
		}
		return 0
	}
	if saved == nil && !pf.autoApprove {
		if !pf.input {
			return m.errorf("No confirmation: apply needs -auto-approve when it cannot ask (-input=false or no terminal)")
		}
		q, detail := "Do you want to perform these actions?", "Pond will perform the actions described above."
		if pf.destroy {
			q, detail = "Do you really want to destroy all resources?", "Pond will destroy all your managed infrastructure, as shown above. There is no undo."
		}
		if !m.confirm(q, detail) {
			fmt.Fprintln(m.stderr, "Apply cancelled.")
			return 1
		}
	}
	persister := &statePersister{b: b, last: prior}
	res, diags := eng.Apply(ctx, p, planner.ApplyOptions{Stop: stop, Writer: persister})
	failed := m.diags(diags)
	if res == nil {
		return 1
	}
	if res.Stopped {
		fmt.Fprintf(m.stderr, "\nStopped: %d changes were not started.\n", len(res.NotAttempted))
	}
	if failed || res.Stopped {
		return 1
	}
	c := m.col()
	switch {
	case op == "destroy" || pf.destroy:
		fmt.Fprintf(m.stdout, "\n%s\n", c.bold(c.green(fmt.Sprintf("Destroy complete! Resources: %d destroyed.", res.Destroyed))))
	default:
		fmt.Fprintf(m.stdout, "\n%s\n", c.bold(c.green(fmt.Sprintf("Apply complete! Resources: %d added, %d changed, %d destroyed.", res.Added, res.Changed, res.Destroyed))))
		m.printOutputs(res.State)
	}
	return 0
}

// printOutputs prints the root outputs of s after an apply.
func (m *meta) printOutputs(s *state.State) {
	if len(s.Outputs) == 0 {
		return
	}
	names := make([]string, 0, len(s.Outputs))
	for n := range s.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(m.stdout, "\n%s\n\n", m.col().bold(m.col().green("Outputs:")))
	for _, n := range names {
		o := s.Outputs[n]
		if o.Sensitive {
			fmt.Fprintf(m.stdout, "%s = <sensitive>\n", n)
			continue
		}
		v, err := decodeOutputValue(o)
		if err != nil {
			fmt.Fprintf(m.stdout, "%s = %s\n", n, string(o.Value))
			continue
		}
		fmt.Fprintf(m.stdout, "%s = %s\n", n, formatValue(v, 0))
	}
}
