package startd

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestTraversable(t *testing.T) {
	// t.TempDir's parent is private to the test's user; the tree must
	// hang from a directory everyone may search.
	root, err := os.MkdirTemp("", "traversable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := mk("open", 0o755)
	private := mk("private", 0o700)
	searchOnly := mk("searchonly", 0o711)
	if err := os.MkdirAll(filepath.Join(private, "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	owner := uint32(os.Getuid())
	stranger := &syscall.Credential{Uid: 65534 + 1000, Gid: 65534 + 1000}
	if owner == stranger.Uid {
		t.Skip("the test's user is the stranger")
	}
	cases := []struct {
		name string
		dir  string
		cred *syscall.Credential
		want bool
	}{
		{"open tree, stranger", open, stranger, true},
		{"search-only parent, stranger", searchOnly, stranger, true},
		{"private dir itself, stranger", private, stranger, false},
		{"below a private dir, stranger", filepath.Join(private, "inner"), stranger, false},
		{"below a private dir, owner", filepath.Join(private, "inner"), &syscall.Credential{Uid: owner, Gid: uint32(os.Getgid())}, true},
		{"private dir, group member", private, &syscall.Credential{Uid: stranger.Uid, Gid: 12345, Groups: []uint32{uint32(os.Getgid())}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := traversable(c.dir, c.cred); got != c.want {
				t.Fatalf("traversable(%s) = %v, want %v", c.dir, got, c.want)
			}
		})
	}
}

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"sea-large-0":       "sea-large-0",
		"slot1@host.domain": "slot1_host.domain",
		"a/b c":             "a_b_c",
	} {
		if got := safeName(in); got != want {
			t.Errorf("safeName(%q) = %q, want %q", in, got, want)
		}
	}
}
