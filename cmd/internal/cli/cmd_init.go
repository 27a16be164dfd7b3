package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state/backend"
)

func (m *meta) cmdInit(ctx context.Context, args []string) int {
	fs := m.newFlagSet("init", "init [-backend-config=KEY=VALUE|FILE]... [-reconfigure] [-input=false] [-upgrade] [-lock=false] [-lock-timeout=D] [-no-color]")
	var (
		bc          backendConfigFlags
		reconfigure bool
		lf          lockFlags
	)
	fs.Var(&bc, "backend-config", "a backend setting KEY=VALUE, or a file of KEY = VALUE lines, merged into the backend block and kept for later commands (repeatable)")
	fs.BoolVar(&reconfigure, "reconfigure", false, "forget the backend settings an earlier init saved")
	// init asks nothing, and its providers are embedded in pondctl:
	// -input and -upgrade are taken for Terraform's scripts and change
	// nothing.
	fs.Bool("input", true, "accepted for Terraform's scripts: init never asks for input")
	fs.Bool("upgrade", false, "accepted for Terraform's scripts: the providers are embedded in pondctl, at its version")
	lf.register(fs)
	if !m.parseNoArgs(fs, args) {
		return 1
	}
	cfg, ok := m.loadConfig()
	if !ok {
		return 1
	}
	c := m.col()
	fmt.Fprintln(m.stdout, c.bold("Initializing the backend..."))
	typ, block, err := backendBlock(cfg)
	if err != nil {
		return m.fail("Invalid backend configuration", err)
	}
	given, err := bc.settings(m.dir)
	if err != nil {
		return m.fail("Invalid backend configuration", err)
	}
	saved := &savedBackend{Type: typ, Config: given}
	if !reconfigure {
		prev, err := readSavedBackend(m.dir)
		if err != nil {
			return m.fail("Invalid backend configuration", err)
		}
		if prev != nil && prev.Type == typ {
			saved.Config = mergeSaved(prev.Config, &savedBackend{Type: typ, Config: given}, typ)
		}
	}
	b, err := backend.New(ctx, typ, mergeSaved(block, saved, typ), m.dir)
	if err != nil {
		return m.fail("Invalid backend configuration", err)
	}
	unlock, ok := m.acquire(ctx, b, lf, "init")
	if !ok {
		return 1
	}
	_, err = b.Read(ctx)
	unlock()
	if err != nil {
		return m.fail("Failed to read the state", err)
	}
	// Only settings that opened a readable state are kept.
	if err := writeSavedBackend(m.dir, saved); err != nil {
		return m.fail("Cannot save the backend configuration", err)
	}
	fmt.Fprintln(m.stdout, c.bold("\nInitializing provider plugins..."))
	used := map[string]bool{}
	for _, r := range cfg.Resources {
		name := resourceTypes[r.Type]
		if r.Mode == config.DataResource {
			name = dataTypes[r.Type]
		}
		if r.ProviderRef != nil {
			name = r.ProviderRef.Name
		}
		used[name] = true
	}
	names := make([]string, 0, len(used))
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	reg := providerRegistry()
	for _, n := range names {
		if _, ok := reg[n]; !ok {
			return m.errorf("Unknown provider %q: pond embeds %s", n, strings.Join(registryNames(reg), ", "))
		}
		fmt.Fprintf(m.stdout, "- Using the embedded %q provider (v%s)\n", n, Version)
	}
	// Everything under .pond is private to its owner: keys, the nodes'
	// data and configuration.
	if err := providers.PrivateDir(filepath.Join(m.dir, ".pond")); err != nil {
		return m.fail("Cannot create the .pond directory", err)
	}
	fmt.Fprintf(m.stdout, "\n%s\n\nYou may now begin working with pond. Try running \"pondctl plan\" to see any changes that are required for your infrastructure.\n", c.bold(c.green("Pond has been successfully initialized!")))
	return 0
}

func registryNames(reg map[string]providers.Factory) []string {
	out := make([]string, 0, len(reg))
	for n := range reg {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
