package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBadKnobs checks that a node refuses to start on a knob it cannot
// read, saying which, before it starts any service.
func TestBadKnobs(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{"POND_ORPHAN_TIMEOUT = soon\n", `POND_ORPHAN_TIMEOUT = "soon": want a duration`},
		{"POND_ORPHAN_TIMEOUT = -5\n", `POND_ORPHAN_TIMEOUT = "-5": must not be negative`},
		{"POND_JOIN_POLICY = Memory >\n", `POND_JOIN_POLICY = "Memory >"`},
		{"POND_END_TIME = tomorrow\n", `POND_END_TIME "tomorrow": want a time such as 2026-11-25T08:00:00Z`},
		{"POND_END_TIME = -1\n", `POND_END_TIME "-1": want a number of seconds since 1970`},
		{"POND_END_TIME = 2001-01-01T00:00:00Z\n", `POND_END_TIME 2001-01-01T00:00:00Z: the node's end has already passed`},
		{"POND_QUARANTINE_TIME = long\n", `POND_QUARANTINE_TIME = "long": want a duration`},
		// A secret knob the startd would copy into the machine ad.
		{"STARTD_ATTRS = Team, DB_PASSWORD\nTeam = 1\nDB_PASSWORD = hunter2\n", "STARTD_ATTRS names DB_PASSWORD, a knob that holds a secret"},
		{"STARTD_ATTRS = Team\nSTARTD_EXPRS = Api_Token\nAPI_TOKEN = hunter2\n", "STARTD_EXPRS names Api_Token, a knob that holds a secret"},
		{"POND_SECRET_KNOBS = DB_CONN\nSTARTD_ATTRS = db_conn\nDB_CONN = \"hunter2\"\n", "STARTD_ATTRS names db_conn, a knob that holds a secret"},
	} {
		t.Run(tc.config, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "condor_config")
			if err := os.WriteFile(path, []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			args := []string{"-name", "k", "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-data-dir", filepath.Join(dir, "data"),
				"-gossip-profile", "fast", "-config", path, "-insecure-api"}
			var log syncBuffer
			if code := Main(ctx, args, &log, &log, Logging{}); code != 1 || !strings.Contains(log.String(), tc.want) {
				t.Fatalf("exit %d, want 1 and an error containing %q:\n%s", code, tc.want, log.String())
			}
			if strings.Contains(log.String(), "hunter2") {
				t.Fatalf("the log shows a secret knob's value:\n%s", log.String())
			}
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
