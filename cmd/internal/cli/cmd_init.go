package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
)

func (m *meta) cmdInit(ctx context.Context, args []string) int {
	fs := m.newFlagSet("init", "init [-no-color]")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	cfg, ok := m.loadConfig()
	if !ok {
		return 1
	}
	c := m.col()
	fmt.Fprintln(m.stdout, c.bold("Initializing the backend..."))
	b, err := m.backendFor(ctx, cfg)
	if err != nil {
		return m.fail("Invalid backend configuration", err)
	}
	if _, err := b.Read(ctx); err != nil {
		return m.fail("Failed to read the state", err)
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
