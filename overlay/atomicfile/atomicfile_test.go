package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, content := range []string{"first, longer content", "second"} {
		if err := Write(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != content {
			t.Fatalf("got %q, want %q", got, content)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("mode %v, want 0600", fi.Mode().Perm())
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("files left beside %s: %v", p, ents)
		}
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}

	missing := filepath.Join(dir, "nope", "f.json")
	if err := Write(missing, []byte("x")); err == nil {
		t.Error("writing into a missing directory: no error")
	}
	if err := SyncDir(filepath.Join(dir, "nope")); err == nil {
		t.Error("syncing a missing directory: no error")
	}
}

// TestWriteAtOnce has many writers replace one file at once: each
// succeeds, the file is one of theirs whole, and no temporary file is
// left. (With one temporary name for all, a writer renamed another's half
// written file, or found its own gone.)
func TestWriteAtOnce(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	const writers = 16
	want := map[string]bool{}
	for i := range writers {
		want[fmt.Sprintf("writer %02d %0*d", i, 4096, i)] = true
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*20)
	for content := range want {
		wg.Go(func() {
			for range 20 {
				if err := Write(p, []byte(content)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !want[string(got)] {
		t.Errorf("the file holds %.40q (%v), not one writer's whole content", got, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left beside %s: %v", p, ents)
	}
}

// TestCreate: the first Create makes the file, mode 0600; later ones leave
// it as it is; of many at once exactly one makes it, every reader sees a
// whole file, and no temporary file is left.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "key")
	if made, err := Create(p, []byte("first")); err != nil || !made {
		t.Fatalf("Create: %v, %v", made, err)
	}
	if made, err := Create(p, []byte("second")); err != nil || made {
		t.Fatalf("Create over an existing file: %v, %v", made, err)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "first" {
		t.Fatalf("the file holds %q, %v", got, err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}

	for round := range 20 {
		p := filepath.Join(dir, fmt.Sprintf("race%d", round))
		content := func(i int) string { return fmt.Sprintf("content %02d of a file written whole", i) }
		var wg sync.WaitGroup
		made := make([]bool, 8)
		errs := make([]error, 8)
		seen := make([]string, 8)
		for i := range made {
			wg.Go(func() {
				made[i], errs[i] = Create(p, []byte(content(i)))
				b, err := os.ReadFile(p)
				if err != nil {
					errs[i] = err
				}
				seen[i] = string(b)
			})
		}
		wg.Wait()
		n, winner := 0, -1
		for i := range made {
			if errs[i] != nil {
				t.Fatalf("round %d, Create %d: %v", round, i, errs[i])
			}
			if made[i] {
				n, winner = n+1, i
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d Creates made the file", round, n)
		}
		for i, s := range seen {
			if s != content(winner) {
				t.Fatalf("round %d: Create %d read %q, want %q", round, i, s, content(winner))
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 21 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want the 21 files alone", names)
	}
	if _, err := Create(filepath.Join(dir, "nope", "f"), nil); err == nil {
		t.Error("creating in a missing directory: no error")
	}
}
