package gossip

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
)

// logWriter turns serf's and memberlist's "[LEVEL] component: message" lines
// into slog records.
type logWriter struct {
	logger *slog.Logger
}

func (w *logWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		level, msg := parseLogLine(string(line))
		if msg == "" {
			continue
		}
		w.logger.Log(context.Background(), level, msg, "source", "serf")
	}
	return len(p), nil
}

func parseLogLine(line string) (slog.Level, string) {
	line = strings.TrimSpace(line)
	level := slog.LevelInfo
	if strings.HasPrefix(line, "[") {
		if end := strings.IndexByte(line, ']'); end > 0 {
			switch line[1:end] {
			case "TRACE", "DEBUG":
				level = slog.LevelDebug
			case "WARN":
				level = slog.LevelWarn
			case "ERR", "ERROR":
				level = slog.LevelError
			}
			line = strings.TrimSpace(line[end+1:])
		}
	}
	return level, line
}
