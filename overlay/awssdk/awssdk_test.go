package awssdk

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/smithy-go/logging"
)

// TestLoad: the configuration Load makes logs the SDK's lines to the
// logger its context carries, a warning at WARN and a debug line at
// DEBUG, within that logger's level; without one, nowhere.
func TestLoad(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	for _, tc := range []struct {
		name   string
		level  slog.Level
		logger bool
		want   []string
		not    []string
	}{
		{"debug", slog.LevelDebug, true, []string{"level=WARN msg=\"falling back\"", "level=DEBUG msg=\"a request\""}, nil},
		{"warn", slog.LevelWarn, true, []string{"level=WARN msg=\"falling back\" source=aws-sdk"}, []string{"a request"}},
		{"no logger", slog.LevelDebug, false, nil, []string{"falling back", "a request"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			ctx := context.Background()
			if tc.logger {
				ctx = NewContext(ctx, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level})))
			}
			cfg, err := Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Logger.Logf(logging.Warn, "falling back")
			cfg.Logger.Logf(logging.Debug, "a request")
			got := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("the log lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("the log has %q:\n%s", n, got)
				}
			}
		})
	}
}
