package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/pond-htc/pond/overlay/agent"
)

// logLevels are the values POND_LOG takes, in any case.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// logSettings reads POND_LOG and POND_LOG_PATH, as Terraform reads TF_LOG
// and TF_LOG_PATH: records at POND_LOG's level (debug, info, warn or error,
// in any case) and above, appended to the file POND_LOG_PATH names or else
// written to stderr. on is false when POND_LOG is unset or empty. closeLog
// closes the log file; it is never nil. An unknown level, or a file that
// cannot be opened, is an error.
func logSettings(getenv func(string) string, stderr io.Writer) (level slog.Level, w io.Writer, on bool, closeLog func() error, err error) {
	closeLog = func() error { return nil }
	name := getenv("POND_LOG")
	if name == "" {
		return 0, nil, false, closeLog, nil
	}
	level, ok := logLevels[strings.ToLower(name)]
	if !ok {
		return 0, nil, false, closeLog, fmt.Errorf("POND_LOG is %q; set it to debug, info, warn or error, or leave it unset for no logs", name)
	}
	w = stderr
	if path := getenv("POND_LOG_PATH"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return 0, nil, false, closeLog, fmt.Errorf("POND_LOG_PATH: %w", err)
		}
		w, closeLog = f, f.Close
	}
	return level, w, true, closeLog, nil
}

// loggerFromEnv returns the logger POND_LOG and POND_LOG_PATH ask for (see
// logSettings), in slog's text format; with POND_LOG unset or empty it is
// nil: no logs, whatever POND_LOG_PATH says.
func loggerFromEnv(getenv func(string) string, stderr io.Writer) (logger *slog.Logger, closeLog func() error, err error) {
	level, w, on, closeLog, err := logSettings(getenv, stderr)
	if err != nil || !on {
		return nil, closeLog, err
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), closeLog, nil
}

// agentLogging is where "pondctl agent" logs: an agent always logs, at
// info to stderr unless POND_LOG and POND_LOG_PATH say otherwise (its
// -log-level flag still has the last word on the level).
func agentLogging(getenv func(string) string, stderr io.Writer) (agent.Logging, func() error, error) {
	level, w, on, closeLog, err := logSettings(getenv, stderr)
	if err != nil || !on {
		return agent.Logging{}, closeLog, err
	}
	return agent.Logging{Output: w, Level: level}, closeLog, nil
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
