package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// logLevels are the values POND_LOG takes, in any case.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// loggerFromEnv returns the logger POND_LOG and POND_LOG_PATH ask for, as
// Terraform's TF_LOG and TF_LOG_PATH do: records at POND_LOG's level (debug,
// info, warn or error, in any case) and above, in slog's text format,
// appended to the file POND_LOG_PATH names or else written to stderr. With
// POND_LOG unset or empty the logger is nil: no logs, whatever
// POND_LOG_PATH says. closeLog closes the log file; it is never nil. An
// unknown level, or a file that cannot be opened, is an error.
func loggerFromEnv(getenv func(string) string, stderr io.Writer) (logger *slog.Logger, closeLog func() error, err error) {
	closeLog = func() error { return nil }
	name := getenv("POND_LOG")
	if name == "" {
		return nil, closeLog, nil
	}
	level, ok := logLevels[strings.ToLower(name)]
	if !ok {
		return nil, closeLog, fmt.Errorf("POND_LOG is %q; set it to debug, info, warn or error, or leave it unset for no logs", name)
	}
	w := stderr
	if path := getenv("POND_LOG_PATH"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, closeLog, fmt.Errorf("POND_LOG_PATH: %w", err)
		}
		w, closeLog = f, f.Close
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), closeLog, nil
}

// setUpLogging gives m the logger POND_LOG and POND_LOG_PATH ask for. It
// reports an error as a diagnostic and returns false; the returned func
// closes the log file.
func (m *meta) setUpLogging() (func() error, bool) {
	logger, closeLog, err := loggerFromEnv(m.getenv, m.stderr)
	if err != nil {
		m.fail("Invalid logging settings", err)
		return nil, false
	}
	m.logger = logger
	return closeLog, true
}
