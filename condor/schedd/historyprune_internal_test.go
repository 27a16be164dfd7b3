package schedd

import "testing"

// TestPruneAfterMoves checks that a small history bound is enforced after
// fewer jobs have left the queue than a large one.
func TestPruneAfterMoves(t *testing.T) {
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
