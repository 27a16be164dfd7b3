package cli

import (
	"context"
	"fmt"

	"github.com/pond-htc/pond/planner/config"
)

func (m *meta) cmdForceUnlock(ctx context.Context, args []string) int {
	fs := m.newFlagSet("force-unlock", "force-unlock [-force] LOCK_ID")
	force := fs.Bool("force", false, "do not ask for confirmation")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 1 {
		return m.errorf("force-unlock needs exactly one argument: the lock ID")
	}
	id := fs.Arg(0)
	cfg, _ := config.LoadDir(m.dir, loadOptions())
	b, err := m.backendFor(ctx, cfg)
	if err != nil {
		return m.fail("Invalid backend configuration", err)
	}
	if !*force && !m.confirm("Do you really want to force-unlock?", "Pond will remove the lock on the state. This will allow local pond commands to modify this state, even though it may still be in use.") {
		fmt.Fprintln(m.stderr, "force-unlock cancelled.")
		return 1
	}
	if err := b.ForceUnlock(ctx, id); err != nil {
		return m.fail("Failed to unlock state", err)
	}
	fmt.Fprintln(m.stdout, m.col().bold(m.col().green("Pond state has been successfully unlocked!")))
	return 0
}
