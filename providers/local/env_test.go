package local

import (
	"slices"
	"testing"
)

// TestAgentEnv checks that agents inherit pondctl's environment, POND_LOG
// included, but not POND_LOG_PATH: they log to their own agent.log.
func TestAgentEnv(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		want    []string
	}{
		{"level passes, path stays", []string{"HOME=/home/u", "POND_LOG=debug", "POND_LOG_PATH=logs/pond.log", "POND_BIN=/usr/bin/pondctl"},
			[]string{"HOME=/home/u", "POND_LOG=debug", "POND_BIN=/usr/bin/pondctl", "PWD=/wd/.pond/local/nodes/a-0"}},
		{"no logging", []string{"HOME=/home/u"}, []string{"HOME=/home/u", "PWD=/wd/.pond/local/nodes/a-0"}},
		{"variables stay", []string{"HOME=/home/u", "POND_VAR_db=s3cret", "POND_VAR_n=3"}, []string{"HOME=/home/u", "PWD=/wd/.pond/local/nodes/a-0"}},
		{"the user's token stays", []string{"HOME=/home/u", "POND_TOKEN=eyJ.x.y", "POND_TOKEN_FILE=/home/u/tok"}, []string{"HOME=/home/u", "PWD=/wd/.pond/local/nodes/a-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agentEnv(tt.environ, "/wd/.pond/local/nodes/a-0"); !slices.Equal(got, tt.want) {
				t.Errorf("agentEnv = %q, want %q", got, tt.want)
			}
		})
	}
}
