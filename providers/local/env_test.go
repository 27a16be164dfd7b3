package local

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAgentEnv checks that agents inherit pondctl's environment, POND_LOG
// and POND_LOG_PATH included, with a relative log path resolved against
// pondctl's working directory rather than the agent's.
func TestAgentEnv(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	got := agentEnv([]string{"HOME=/home/u", "POND_LOG=debug", "POND_LOG_PATH=logs/pond.log", "POND_BIN=/usr/bin/pondctl"}, "/wd/.pond/local/nodes/a-0")
	want := []string{"HOME=/home/u", "POND_LOG=debug", "POND_LOG_PATH=" + filepath.Join(wd, "logs", "pond.log"), "POND_BIN=/usr/bin/pondctl", "PWD=/wd/.pond/local/nodes/a-0"}
	if !slices.Equal(got, want) {
		t.Errorf("agentEnv = %q, want %q", got, want)
	}
	abs := []string{"POND_LOG=info", "POND_LOG_PATH=/var/log/pond.log", "POND_LOG_PATH="}
	if got := agentEnv(abs, "/d"); !slices.Equal(got, append(abs, "PWD=/d")) {
		t.Errorf("agentEnv = %q, want %q and PWD", got, abs)
	}
}
