package confine

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// sandbox is a directory with a secret outside it and links of every kind
// inside it.
func sandbox(t *testing.T) (dir, secret string, root *os.Root) {
	t.Helper()
	base := t.TempDir()
	secret = filepath.Join(base, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(base, "job")
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "data"), []byte("data"), 0o644))
	must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	must(t, os.Symlink(secret, filepath.Join(dir, "abs")))
	must(t, os.Symlink("../secret", filepath.Join(dir, "rel")))
	must(t, os.Symlink("data", filepath.Join(dir, "inside")))
	must(t, os.Symlink("..", filepath.Join(dir, "up")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	root, err := os.OpenRoot(dir)
	must(t, err)
	t.Cleanup(func() { root.Close() })
	return dir, secret, root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadFile(t *testing.T) {
	_, _, root := sandbox(t)
	for name, want := range map[string]error{
		"data": nil, "inside": nil, "sub/../data": nil,
		"abs": ErrEscapes, "rel": ErrEscapes, "up/secret": ErrEscapes, "up/job/data": ErrEscapes,
		"fifo": ErrSpecial, "sub": ErrDirectory, "missing": os.ErrNotExist,
	} {
		b, err := ReadFile(root, name)
		switch {
		case want == nil && (err != nil || string(b) != "data"):
			t.Errorf("ReadFile(%s) = %q, %v", name, b, err)
		case want != nil && !errors.Is(err, want):
			t.Errorf("ReadFile(%s) = %q, %v; want %v", name, b, err, want)
		}
	}
}

func TestWriteFile(t *testing.T) {
	dir, secret, root := sandbox(t)
	for name, want := range map[string]error{
		"new": nil, "data": nil, "inside": nil,
		"abs": ErrEscapes, "rel": ErrEscapes, "up/secret": ErrEscapes, "up/new": ErrEscapes,
		"fifo": ErrSpecial, "sub": ErrDirectory,
	} {
		err := WriteFile(root, name, []byte("out"), 0o644)
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("WriteFile(%s) = %v, want %v", name, err, want)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Errorf("the file outside was written: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "data")); string(b) != "out" {
		t.Errorf("data = %q", b)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "new")); err == nil {
		t.Error("a file was created outside the directory")
	}
}

func TestWritePathNoFollow(t *testing.T) {
	dir, secret, _ := sandbox(t)
	if err := WritePathNoFollow(filepath.Join(dir, "abs"), []byte("out"), 0o644); !errors.Is(err, ErrSymlink) {
		t.Errorf("through a link: %v", err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Errorf("the link's target was written: %q", b)
	}
	if err := WritePathNoFollow(filepath.Join(dir, "fifo"), nil, 0o644); !errors.Is(err, ErrSpecial) {
		t.Errorf("fifo: %v", err)
	}
	if err := WritePathNoFollow(filepath.Join(dir, "data"), []byte("x"), 0o644); err != nil {
		t.Error(err)
	}
}

func TestReadPath(t *testing.T) {
	dir, _, _ := sandbox(t)
	if _, err := ReadPath(filepath.Join(dir, "fifo")); !errors.Is(err, ErrSpecial) {
		t.Errorf("fifo: %v", err)
	}
	if _, err := ReadPath(dir); !errors.Is(err, ErrDirectory) {
		t.Errorf("directory: %v", err)
	}
	if b, err := ReadPath(filepath.Join(dir, "inside")); err != nil || string(b) != "data" {
		t.Errorf("link: %q %v", b, err)
	}
}

func TestLocal(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"a", "a"}, {"a/../b", "b"}, {"/scratch/x/out", "out"}, {"/scratch/x/d/out", "d/out"},
		{"../a", ""}, {"a/../../b", ""}, {"/etc/shadow", ""}, {"/scratch/x", ""}, {"/scratch/xy/a", ""}, {"", ""},
	} {
		got, err := Local("/scratch/x", c.name)
		if got != c.want || (c.want == "") != (err != nil) {
			t.Errorf("Local(%q) = %q, %v; want %q", c.name, got, err, c.want)
		}
		if c.want == "" && c.name != "" && c.name != "/scratch/x" && !errors.Is(err, ErrEscapes) {
			t.Errorf("Local(%q): %v", c.name, err)
		}
	}
}
