package macro

import "testing"

func TestJoinContinued(t *testing.T) {
	tests := []struct {
		name     string
		phys     []string
		want     string
		wantLast int
	}{
		{"single", []string{"A = 1", "B = 2"}, "A = 1", 0},
		{"continued", []string{"A = 1 \\", "   2 \\", "\t3", "B"}, "A = 1 2 3", 2},
		{"comment inside is dropped", []string{"A = x\\", "# note", "y"}, "A = x", 1},
		{"continued comment carries on", []string{"A = x\\", "# note \\", "y"}, "A = xy", 2},
		{"backslash on the last line", []string{"A = x \\"}, "A = x ", 0},
		{"blank after backslash", []string{"A = x\\  ", "y"}, "A = xy", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, last := JoinContinued(tt.phys, 0)
			if got != tt.want || last != tt.wantLast {
				t.Fatalf("JoinContinued = %q, %d; want %q, %d", got, last, tt.want, tt.wantLast)
			}
		})
	}
}
