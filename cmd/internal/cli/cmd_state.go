package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/state"
)

func (m *meta) cmdState(ctx context.Context, args []string) int {
	edit := func(op string) func(context.Context, []string) int {
		return func(ctx context.Context, args []string) int { return m.stateEdit(ctx, op, args) }
	}
	return m.subcommand(ctx, "state", args, []subcommand{
		{"list", m.stateList},
		{"show", m.stateShow},
		{"rm", edit("rm")},
		{"mv", edit("mv")},
		{"pull", m.statePull},
		{"push", m.statePush},
	})
}

func parseAddrs(args []string) ([]state.Address, error) {
	out := make([]state.Address, 0, len(args))
	for _, a := range args {
		addr, err := state.ParseAddress(a)
		if err != nil {
			return nil, err
		}
		out = append(out, addr)
	}
	return out, nil
}

func (m *meta) stateList(ctx context.Context, args []string) int {
	fs := m.newFlagSet("state list", "state list [-json] [ADDR...]")
	jsonOut := fs.Bool("json", false, "print as a JSON array")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	addrs, err := parseAddrs(fs.Args())
	if err != nil {
		return m.fail("Invalid address", err)
	}
	_, s, ok := m.loadStateOnly(ctx)
	if !ok {
		return 1
	}
	list := s.Filter(addrs)
	if *jsonOut {
		out := make([]string, len(list))
		for i, a := range list {
			out[i] = a.String()
		}
		return m.printJSON(out)
	}
	for _, a := range list {
		fmt.Fprintln(m.stdout, a.String())
	}
	if len(addrs) > 0 && len(list) == 0 {
		return m.errorf("No matching instances: the state has nothing at %s", fs.Arg(0))
	}
	return 0
}

func (m *meta) stateShow(ctx context.Context, args []string) int {
	fs := m.newFlagSet("state show", "state show [-json] ADDR")
	jsonOut := fs.Bool("json", false, "print as JSON")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 1 {
		return m.errorf("state show needs exactly one instance address")
	}
	addr, err := state.ParseAddress(fs.Arg(0))
	if err != nil {
		return m.fail("Invalid address", err)
	}
	_, s, ok := m.loadStateOnly(ctx)
	if !ok {
		return 1
	}
	inst := s.Instance(addr)
	r := s.Resource(addr)
	if inst == nil || r == nil {
		return m.errorf("No instance found for the given address: %s is not in the state", addr)
	}
	if *jsonOut {
		return m.printJSON(map[string]any{"address": addr.String(), "provider_name": r.Provider, "values": valueJSON(m.instanceValue(r, inst)), "depends_on": inst.Dependencies})
	}
	m.showInstance(r, inst)
	return 0
}

// stateEdit implements state rm and state mv under the state lock.
func (m *meta) stateEdit(ctx context.Context, op string, args []string) int {
	var lf lockFlags
	fs := m.newFlagSet("state "+op, map[string]string{"rm": "state rm [options] ADDR...", "mv": "state mv [options] SOURCE DESTINATION"}[op])
	lf.register(fs)
	dryRun := fs.Bool("dry-run", false, "show what would change without changing the state")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	addrs, err := parseAddrs(fs.Args())
	if err != nil {
		return m.fail("Invalid address", err)
	}
	if op == "rm" && len(addrs) == 0 {
		return m.errorf("state rm needs at least one address")
	}
	if op == "mv" && len(addrs) != 2 {
		return m.errorf("state mv needs exactly two addresses: the source and the destination")
	}
	cfg, _ := config.LoadDir(m.dir, loadOptions())
	b, prior, unlock, ok := m.lockedState(ctx, cfg, lf, "OperationTypeState"+op)
	if !ok {
		return 1
	}
	defer unlock()
	next := prior.DeepCopy()
	switch op {
	case "rm":
		for _, a := range addrs {
			removed, err := next.Remove(a)
			if err != nil {
				return m.fail("Invalid target address", err)
			}
			for _, r := range removed {
				if *dryRun {
					fmt.Fprintf(m.stdout, "Would remove %s\n", r)
				} else {
					fmt.Fprintf(m.stdout, "Removed %s\n", r)
				}
			}
		}
	case "mv":
		if err := next.Move(addrs[0], addrs[1]); err != nil {
			return m.fail("Invalid move", err)
		}
		verb := "Successfully moved"
		if *dryRun {
			verb = "Would move"
		}
		fmt.Fprintf(m.stdout, "%s %q to %q\n", verb, addrs[0].String(), addrs[1].String())
	}
	if *dryRun {
		return 0
	}
	hints := state.HistoryHints{Gone: state.ActionRemoved}
	if op == "mv" {
		hints = state.HistoryHints{Moved: instanceMoves(prior, next)}
	}
	persister, ok := m.persister("state "+op, b, prior, hints)
	if !ok {
		return 1
	}
	if err := persister.WriteState(ctx, next); err != nil {
		return m.fail("Failed to save state", err)
	}
	if op == "rm" {
		fmt.Fprintln(m.stdout, "Successfully removed the listed resource instance(s).")
	}
	return 0
}

func (m *meta) statePull(ctx context.Context, args []string) int {
	fs := m.newFlagSet("state pull", "state pull")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	_, s, ok := m.loadStateOnly(ctx)
	if !ok {
		return 1
	}
	data, err := state.Encode(s)
	if err != nil {
		return m.fail("Cannot encode the state", err)
	}
	_, _ = m.stdout.Write(data)
	return 0
}

func (m *meta) statePush(ctx context.Context, args []string) int {
	var lf lockFlags
	fs := m.newFlagSet("state push", "state push [-force] FILE (- for standard input)")
	lf.register(fs)
	force := fs.Bool("force", false, "write the state even if lineage or serial say it is older or unrelated")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 1 {
		return m.errorf("state push needs exactly one argument: a state file, or - for standard input")
	}
	var data []byte
	var err error
	if fs.Arg(0) == "-" {
		data, err = io.ReadAll(m.stdin)
	} else {
		data, err = os.ReadFile(m.path(fs.Arg(0)))
	}
	if err != nil {
		return m.fail("Cannot read the state to push", err)
	}
	incoming, err := state.Decode(data, fs.Arg(0))
	if err != nil {
		return m.fail("Invalid state to push", err)
	}
	cfg, _ := config.LoadDir(m.dir, loadOptions())
	b, err := m.backendFor(ctx, cfg)
	if err != nil {
		return m.fail("Invalid backend configuration", err)
	}
	unlock, ok := m.acquire(ctx, b, lf, "OperationTypeStatePush")
	if !ok {
		return 1
	}
	defer unlock()
	current, err := b.Read(ctx)
	if err != nil {
		return m.fail("Failed to load state", err)
	}
	if err := state.CheckPush(current, incoming, *force); err != nil {
		return m.fail("Failed to push state", err)
	}
	// The pushed state keeps its history, and records the push: what it
	// changes in the stored state.
	h, ok := m.recorder("state push", current, state.HistoryHints{})
	if !ok {
		return 1
	}
	h.past = incoming.History
	h.record(incoming)
	if err := b.Write(ctx, incoming); err != nil {
		return m.fail("Failed to write state", err)
	}
	return 0
}
