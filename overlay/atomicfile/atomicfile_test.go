package atomicfile

import (
	"os"
	"path/filepath"
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
		if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
			t.Errorf("temporary file left: %v", err)
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
