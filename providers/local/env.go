package local

import (
	"path/filepath"
	"strings"
)

// agentEnv is the environment of an agent process that runs in directory
// dir: pondctl's own, so that POND_LOG and POND_LOG_PATH reach the agents as
// TF_LOG reaches Terraform's plugins, with a relative POND_LOG_PATH made
// absolute (it names a file from pondctl's working directory) and PWD set to
// dir, as exec.Cmd sets it when it chooses the environment itself.
func agentEnv(environ []string, dir string) []string {
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if path, ok := strings.CutPrefix(kv, "POND_LOG_PATH="); ok && path != "" && !filepath.IsAbs(path) {
			if abs, err := filepath.Abs(path); err == nil {
				kv = "POND_LOG_PATH=" + abs
			}
		}
		out = append(out, kv)
	}
	return append(out, "PWD="+dir)
}
