package cli

import (
	"fmt"
	"runtime"
)

func (m *meta) cmdVersion(args []string) int {
	fs := m.newFlagSet("version", "version [-json]")
	jsonOut := fs.Bool("json", false, "print as JSON")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	platform := runtime.GOOS + "_" + runtime.GOARCH
	if *jsonOut {
		return m.printJSON(map[string]any{"pond_version": Version, "platform": platform, "go_version": runtime.Version()})
	}
	fmt.Fprintf(m.stdout, "Pond v%s\non %s\n", Version, platform)
	return 0
}
