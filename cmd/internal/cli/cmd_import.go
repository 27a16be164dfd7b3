package cli

import (
	"context"
	"fmt"

	"github.com/pond-htc/pond/state"
)

func (m *meta) cmdImport(ctx context.Context, args []string) int {
	var vf varFlags
	var lf lockFlags
	fs := m.newFlagSet("import", "import [options] ADDR ID")
	vf.register(fs)
	lf.register(fs)
	input := fs.Bool("input", true, "ask for missing variable values")
	sea := fs.String("sea", "", "API address of an agent in the sea")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 2 {
		return m.errorf("import needs two arguments: the resource address and the ID of the object to import")
	}
	addr, err := state.ParseAddress(fs.Arg(0))
	if err != nil {
		return m.fail("Invalid resource address", err)
	}
	cfg, ok := m.loadConfig()
	if !ok {
		return 1
	}
	vars, ok := m.collectVars(cfg, &vf, *input)
	if !ok {
		return 1
	}
	b, prior, unlock, ok := m.lockedState(ctx, cfg, lf, "OperationTypeImport")
	if !ok {
		return 1
	}
	defer unlock()
	eng := m.engine(cfg, vars, m.seaAddr(*sea, cfg), nil)
	defer eng.Close()
	fmt.Fprintf(m.stdout, "%s Importing from ID %q...\n", m.col().bold(addr.String()+":"), fs.Arg(1))
	next, diags := eng.Import(ctx, prior, addr, fs.Arg(1))
	if diags.HasErrors() {
		m.diags(diags)
		return 1
	}
	hints := state.HistoryHints{Actions: map[string]string{}}
	for _, a := range next.Addresses() {
		if prior.Instance(a) == nil {
			hints.Actions[a.String()] = state.ActionImport
		}
	}
	persister, ok := m.persister("import", b, prior, hints)
	if !ok {
		return 1
	}
	if err := persister.WriteState(ctx, next); err != nil {
		return m.fail("Failed to save state", err)
	}
	fmt.Fprintf(m.stdout, "%s Import complete!\n\n%s\n\nThe resources that were imported are shown above. These resources are now in your pond state and will henceforth be managed by pond.\n", m.col().bold(addr.String()+":"), m.col().bold(m.col().green("Import successful!")))
	m.diags(diags)
	return 0
}
