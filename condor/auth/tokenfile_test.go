package auth

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTokenFile checks that the token of a file is read again when the
// file changes, and that an unreadable or empty file keeps the last one.
func TestTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.token")
	if _, err := TokenFile(path); err == nil {
		t.Fatal("TokenFile of a missing file: no error")
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write("\n")
	if _, err := TokenFile(path); err == nil {
		t.Fatal("TokenFile of an empty file: no error")
	}
	write("first\n")
	tok, err := TokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name, content, want string
		remove              bool
	}{
		{name: "unchanged", want: "first"},
		{name: "replaced", content: "second-token\n", want: "second-token"},
		{name: "emptied", content: "  \n", want: "second-token"},
		{name: "removed", remove: true, want: "second-token"},
		{name: "back", content: "third\n", want: "third"},
	} {
		switch {
		case step.remove:
			os.Remove(path)
		case step.content != "":
			write(step.content)
		}
		if got := tok(); got != step.want {
			t.Errorf("%s: token %q, want %q", step.name, got, step.want)
		}
	}
}
