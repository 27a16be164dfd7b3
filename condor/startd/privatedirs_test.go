package startd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/startd/jobshim"
	"github.com/pond-htc/pond/condor/testenv"
)

// TestPrivateTmpReused runs jobs one after the other whose private
// temporary directories come from the spare set the one before left:
// the set is taken rather than made, and a job sees nothing an earlier one
// wrote in /tmp or /dev/shm (files, directories, a link, whose target
// outside is not followed); a set found changed is not taken, none is kept
// beyond the bound or once the startd shuts down.
func TestPrivateTmpReused(t *testing.T) {
	iso := testIsolation(t)
	if len(iso.mounts) == 0 {
		testenv.SkipOrFailf(t, "no private /tmp here: %s", iso.why)
	}
	s := &Startd{iso: iso, execute: t.TempDir()}
	outside := filepath.Join(t.TempDir(), "kept")
	if err := os.WriteFile(outside, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("pond-reused-%d", time.Now().UnixNano())
	n := 0
	run := func(script string) (string, string) {
		t.Helper()
		n++
		dir := filepath.Join(s.execute, fmt.Sprintf("dir_%d", n))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		spec := jobshim.Spec{Path: "/bin/sh", Args: []string{"/bin/sh", "-c", script}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}}
		var err error
		if spec.Mounts, err = s.privateDirs(dir); err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dir, "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		p, err := startSupervisor(iso, spec, out, out, out)
		if err != nil {
			t.Fatal(err)
		}
		p.wait()
		if p.final == nil || p.final.ExitCode != 0 {
			t.Fatalf("job %q ended with %+v (%v): %s", script, p.final, p.waitErr, readAll(filepath.Join(dir, "out")))
		}
		return dir, readAll(filepath.Join(dir, "out"))
	}
	spares := func() []string {
		s.spares.mu.Lock()
		defer s.spares.mu.Unlock()
		return append([]string(nil), s.spares.dirs...)
	}
	write := fmt.Sprintf("umask 077; echo secret > /tmp/%[1]s; mkdir -p /tmp/d/e; echo secret > /tmp/d/e/f; echo secret > /dev/shm/%[1]s; ln -s %[2]s /tmp/link; ln -s %[3]s /tmp/dirlink", name, outside, filepath.Dir(outside))
	dir, _ := run(write)
	s.recycleScratch(dir)
	kept := spares()
	if len(kept) != 1 {
		t.Fatalf("spare sets after a job: %v, want one", kept)
	}
	for _, p := range []string{dir, nsDir(dir)} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left after the job", p)
		}
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "host" {
		t.Errorf("a link's target outside was touched: %q, %v", b, err)
	}
	dir, got := run(fmt.Sprintf("cat /tmp/%[1]s /dev/shm/%[1]s /tmp/d/e/f 2>/dev/null; ls -A /tmp /dev/shm", name))
	for _, line := range strings.Split(got, "\n") {
		if line == "secret" || line == name || line == "link" || line == "dirlink" || line == "d" {
			t.Errorf("a later job saw the first one's files: %q", got)
			break
		}
	}
	if left := spares(); len(left) != 0 {
		t.Errorf("the second job did not take the spare set: %v left", left)
	}
	if _, err := os.Lstat(kept[0]); err == nil {
		t.Errorf("the spare set %s is still there once taken", kept[0])
	}

	// A set found changed is removed, not taken.
	s.recycleScratch(dir)
	kept = spares()
	if len(kept) != 1 {
		t.Fatalf("spare sets: %v, want one", kept)
	}
	if err := os.Chmod(privateDir(kept[0], iso.mounts[0]), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, _ = run("ls -ld /tmp")
	if _, err := os.Lstat(kept[0]); err == nil {
		t.Errorf("a changed spare set %s is left", kept[0])
	}
	if fi, err := os.Lstat(privateDir(nsDir(dir), iso.mounts[0])); err != nil || fi.Mode()&os.ModePerm != 0o777 {
		t.Errorf("the job's private %s: %v, %v; want one made anew", iso.mounts[0], fi, err)
	}
	s.recycleScratch(dir)

	// The bound, then shutdown.
	for i := range maxSpareDirs + 2 {
		d := filepath.Join(s.execute, fmt.Sprintf("dir_b%d", i))
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := scratchMounts(d, iso.mounts); err != nil {
			t.Fatal(err)
		}
		s.recycleScratch(d)
	}
	if got := len(spares()); got != maxSpareDirs {
		t.Errorf("%d spare sets kept, want the bound %d", got, maxSpareDirs)
	}
	s.dropSpares()
	dir, _ = run("true")
	s.recycleScratch(dir)
	ents, _ := os.ReadDir(s.execute)
	if len(ents) != 0 || len(spares()) != 0 {
		t.Errorf("after shutdown the execute directory holds %d entries, %d spare sets", len(ents), len(spares()))
	}
}
