package schedd

import (
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/config"
)

func TestLoadHistoryBound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		knobs string
		want  int64
		err   string
	}{
		{"", 3 * 20 << 20, ""},
		{"MAX_HISTORY_LOG = 1000\n", 3000, ""},
		{"MAX_HISTORY_LOG = 1000\nMAX_HISTORY_ROTATIONS = 0\n", 1000, ""},
		{"MAX_HISTORY_LOG = 0\n", 0, ""},
		{"ENABLE_HISTORY_ROTATION = false\n", 0, ""},
		{"MAX_HISTORY_LOG = -1\n", 0, "MAX_HISTORY_LOG = -1"},
		{"MAX_HISTORY_LOG = lots\n", 0, "MAX_HISTORY_LOG"},
		{"MAX_HISTORY_ROTATIONS = -2\n", 0, "MAX_HISTORY_ROTATIONS = -2"},
		{"ENABLE_HISTORY_ROTATION = maybe\n", 0, "ENABLE_HISTORY_ROTATION"},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSpace(tt.knobs), func(t *testing.T) {
			cfg := config.New(config.Options{})
			if err := cfg.ParseInto("test.cfg", []byte(tt.knobs)); err != nil {
				t.Fatal(err)
			}
			got, err := loadHistoryBound(cfg)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one naming %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("bound %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// TestPruneAfterMoves checks that a small history bound is enforced after
// fewer jobs have left the queue than a large one.
func TestPruneAfterMoves(t *testing.T) {
	t.Parallel()
	tests := []struct {
		bound int64
		want  int64
	}{
		{defaultMaxHistoryLog * (1 + defaultMaxHistoryRotations), historyPruneMoves},
		{2 * historyPruneMoves * minHistoryAdBytes, historyPruneMoves},
		{200000, 200},
		{1000, 1},
		{1, 1},
	}
	for _, tt := range tests {
		if got := pruneAfterMoves(tt.bound); got != tt.want {
			t.Errorf("pruneAfterMoves(%d) = %d, want %d", tt.bound, got, tt.want)
		}
	}
}
