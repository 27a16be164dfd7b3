package dagman

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Config is what a DAG's CONFIG file sets: DAGMan's knobs this manager
// acts on. A zero value is "not set".
type Config struct {
	// MaxJobs is DAGMAN_MAX_JOBS_SUBMITTED, MaxIdle DAGMAN_MAX_JOBS_IDLE,
	// MaxPre DAGMAN_MAX_PRE_SCRIPTS, MaxPost DAGMAN_MAX_POST_SCRIPTS.
	MaxJobs, MaxIdle, MaxPre, MaxPost int
	// MaxSubmitsPerInterval is DAGMAN_MAX_SUBMITS_PER_INTERVAL: the nodes
	// submitted at most between two reads of the nodes' log.
	MaxSubmitsPerInterval int
	// ScanInterval is DAGMAN_USER_LOG_SCAN_INTERVAL: the longest wait
	// between two reads of the nodes' log.
	ScanInterval time.Duration
	// Ignored are the other knobs the file sets, as "file:line: NAME",
	// which this manager does not act on.
	Ignored []string
}

// configKnobs are the knobs a CONFIG file may set, and where each goes.
var configKnobs = map[string]func(c *Config, v int){
	"DAGMAN_MAX_JOBS_SUBMITTED":       func(c *Config, v int) { c.MaxJobs = v },
	"DAGMAN_MAX_JOBS_IDLE":            func(c *Config, v int) { c.MaxIdle = v },
	"DAGMAN_MAX_PRE_SCRIPTS":          func(c *Config, v int) { c.MaxPre = v },
	"DAGMAN_MAX_POST_SCRIPTS":         func(c *Config, v int) { c.MaxPost = v },
	"DAGMAN_MAX_SUBMITS_PER_INTERVAL": func(c *Config, v int) { c.MaxSubmitsPerInterval = v },
	"DAGMAN_USER_LOG_SCAN_INTERVAL":   func(c *Config, v int) { c.ScanInterval = time.Duration(v) * time.Second },
}

// ReadConfig reads a DAG's CONFIG file (relative to the DAG file's
// directory): HTCondor configuration lines "NAME = VALUE", comments and
// blank lines. A knob this manager acts on must have a non-negative
// integer value (DAGMAN_USER_LOG_SCAN_INTERVAL a positive one); the
// others are returned in Ignored, for the caller to warn of.
func ReadConfig(d *DAG) (Config, error) {
	var c Config
	if d.Config == "" {
		return c, nil
	}
	path := d.Config
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(d.File), path)
	}
	text, err := readBounded(path)
	if err != nil {
		return c, fmt.Errorf("CONFIG file: %w", err)
	}
	return parseConfig(path, text)
}

// parseConfig reads the text of the CONFIG file at path.
func parseConfig(path string, text []byte) (Config, error) {
	var c Config
	lines := strings.Split(string(text), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		at := i + 1
		// A line ending in a backslash goes on.
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + strings.TrimSpace(lines[i])
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, val, ok := strings.Cut(line, "=")
		if !ok {
			return c, &Error{File: path, Line: at, Msg: fmt.Sprintf("expected NAME = VALUE, not %q", line)}
		}
		name, val = strings.ToUpper(strings.TrimSpace(name)), strings.TrimSpace(val)
		set, known := configKnobs[name]
		if !known {
			c.Ignored = append(c.Ignored, fmt.Sprintf("%s:%d: %s", path, at, name))
			continue
		}
		v, err := strconv.Atoi(val)
		if name == "DAGMAN_USER_LOG_SCAN_INTERVAL" {
			if err != nil || v <= 0 || v > 86400 {
				return c, &Error{File: path, Line: at, Msg: fmt.Sprintf("%s = %q is not a number of seconds from 1 to 86400", name, val)}
			}
		} else if err != nil || v < 0 || v > 1<<30 {
			return c, &Error{File: path, Line: at, Msg: fmt.Sprintf("%s = %q is not a non-negative integer (up to 2^30)", name, val)}
		}
		set(&c, v)
	}
	return c, nil
}
