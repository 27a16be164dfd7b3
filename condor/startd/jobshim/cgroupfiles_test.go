package jobshim

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupFilesKeptByCgroup: a supervisor's kept cgroup.procs file
// serves the same cgroup's next job, and never a cgroup made since at the
// same path (another serial), whose own file is opened. Plain files stand
// for a cgroup's.
func TestCgroupFilesKeptByCgroup(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cgroup.procs")
	home := filepath.Join(dir, "home.procs")
	for _, f := range []string{p, home} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	written := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	files := &cgroupFiles{}
	spec := Spec{Cgroup: []string{p}, CgroupHome: []string{home}, CgroupSerial: 1}
	if err := files.join(spec.Cgroup, 1); err != nil {
		t.Fatal(err)
	}
	if err := files.join(spec.CgroupHome, 0); err != nil {
		t.Fatal(err)
	}
	files.keepOnly(spec)
	if len(files.open) != 2 || written(p) != "0" {
		t.Fatalf("%d files kept, %q written", len(files.open), written(p))
	}

	// The cgroup is removed and another made at its path.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	spec.CgroupSerial = 2
	if err := files.join(spec.Cgroup, spec.CgroupSerial); err != nil {
		t.Fatal(err)
	}
	if written(p) != "0" {
		t.Fatal("the supervisor wrote itself to the file of the cgroup removed, not of the one made at its path since")
	}
	files.keepOnly(spec)
	if len(files.open) != 2 {
		t.Fatalf("%d files kept after the second job, want its cgroup's and the home's", len(files.open))
	}
	files.keepOnly()
	if len(files.open) != 0 {
		t.Fatalf("%d files left open", len(files.open))
	}
}
