package sgetest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/gridengine/sgetest"
)

// TestStart starts a cell, runs a job in it to its end, and finds it in
// the accounting file; stopping the cell removes its directory.
func TestStart(t *testing.T) {
	var dir string
	t.Run("cell", func(t *testing.T) {
		c := sgetest.Start(t, sgetest.Options{Slots: 2})
		dir = c.Dir
		work := t.TempDir()
		script := filepath.Join(work, "job.sh")
		if err := os.WriteFile(script, []byte("#!/bin/sh\necho ran as $(id -un) in $SGE_CELL\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(c.Run(t, "qsub", "-terse", "-N", "sgetest-job", "-j", "y", "-o", filepath.Join(work, "out"), "-wd", work, script))
		deadline := time.Now().Add(30 * time.Second)
		for len(c.Jobs(t, "sgetest-job")) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("job %s still queued or running after 30 s:\n%s\n%s", id, c.Run(t, "qstat", "-j", id), c.Logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
		if out, err := os.ReadFile(filepath.Join(work, "out")); err != nil || string(out) != "ran as root in "+sgetest.CellName+"\n" {
			t.Fatalf("the job's output: %q, %v", out, err)
		}
		var acct string
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(acct, "jobnumber    "+id); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("qacct does not show job %s:\n%s", id, acct)
			}
			acct = c.Run(t, "qacct", "-j", id)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cell's directory is left: %v", err)
	}
}
