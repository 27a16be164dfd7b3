package sgetest_test

import (
	"os"
	"os/exec"
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
		var acct []byte
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(string(acct), "jobnumber    "+id); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("qacct does not show job %s:\n%s", id, acct)
			}
			cmd := exec.Command("qacct", "-j", id)
			cmd.Env = append(os.Environ(), c.Env()...)
			acct, _ = cmd.CombinedOutput()
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cell's directory is left: %v", err)
	}
}

// TestSideBySide: two cells on this machine keep to their own jobs: a
// job deleted in one leaves the other's job of the same number running.
func TestSideBySide(t *testing.T) {
	a := sgetest.Start(t, sgetest.Options{Slots: 1})
	b := sgetest.Start(t, sgetest.Options{Slots: 1})
	work := t.TempDir()
	script := filepath.Join(work, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $$ > \"$1\"\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*sgetest.Cell{a, b} {
		c.Run(t, "qsub", "-N", "sleeper", "-j", "y", "-o", "/dev/null", "-wd", work, script, filepath.Join(c.Dir, "pid"))
	}
	pidOf := func(c *sgetest.Cell) string {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if data, err := os.ReadFile(filepath.Join(c.Dir, "pid")); err == nil && len(data) > 0 {
				return strings.TrimSpace(string(data))
			}
		}
		t.Fatalf("the job of %s never started:\n%s", c.Dir, c.Logs())
		return ""
	}
	pidA, pidB := pidOf(a), pidOf(b)
	a.Run(t, "qdel", "sleeper")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + pidA); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted job %s still runs", pidA)
		}
	}
	time.Sleep(2 * time.Second)
	if _, err := os.Stat("/proc/" + pidB); err != nil {
		t.Fatalf("deleting the job of one cell ended the other's: %v", err)
	}
	if jobs := b.Jobs(t, "sleeper"); len(jobs) != 1 {
		t.Fatalf("the other cell's jobs: %v", jobs)
	}
}
