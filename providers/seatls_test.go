package providers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenAuthority(t *testing.T) {
	t.Setenv("POND_AUTHORITY", "")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".pond"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenAuthority(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, ".pond"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf(".pond has mode %v, want 0700", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(dir, ".pond", "auth")); err != nil {
		t.Errorf("no authority made: %v", err)
	}

	file := t.TempDir()
	if err := os.WriteFile(filepath.Join(file, ".pond"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenAuthority(file); err == nil || !strings.HasPrefix(err.Error(), "authority: ") || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file named .pond: got %v, want an authority error saying it is not a directory", err)
	}
}
