package tools

import (
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"2026-01-02T15:04:05Z", time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC), false},
		{"2026-01-02 15:04:05", time.Date(2026, 1, 2, 15, 4, 5, 0, time.Local), false},
		{"2026-01-02 15:04", time.Date(2026, 1, 2, 15, 4, 0, 0, time.Local), false},
		{"2026-01-02", time.Date(2026, 1, 2, 0, 0, 0, 0, time.Local), false},
		{"1700000000", time.Unix(1_700_000_000, 0), false},
		{"2h", now.Add(-2 * time.Hour), false},
		{" 90m ", now.Add(-90 * time.Minute), false},
		{"yesterday", time.Time{}, true},
		{"-2h", time.Time{}, true},
		{"0", now, false},
		{"now", now, false},
		{"", time.Time{}, true},
		{"99999999999999999999", time.Time{}, true},
	} {
		got, err := ParseTime(tc.in, now)
		if (err != nil) != tc.err || (!tc.err && !got.Equal(tc.want)) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-01-02T15:04:05Z", "2026-01-02 15:04", "1700000000", "2h", "", "1e9"} {
		f.Add(s)
	}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTime(s, now)
		if err == nil && got.IsZero() {
			t.Fatalf("ParseTime(%q): the zero time without an error", s)
		}
	})
}
