package startd

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pond-htc/pond/condor/config"
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

// TestExecuteLayout checks where a startd running as root keeps its jobs'
// scratch directories: in its data directory when every job user may
// reach it there, else, for a data directory private to its owner (the
// local provider's, under a 0700 .pond), in a directory of its own in
// the shared execute root, without a warning and without opening the data
// directory. Both are root's and 0711 (enter, not list). What a local user
// put first where the shared root goes is refused, not used.
func TestExecuteLayout(t *testing.T) {
	rootOnly(t)
	open, err := os.MkdirTemp("", "layout")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(open) })
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(t *testing.T, dataDir, shared string) (*Startd, string, error) {
		var log bytes.Buffer
		s, err := New(Options{Config: config.New(config.Options{}), Name: "node1", Address: "127.0.0.1:1", DataDir: dataDir,
			SharedExecute: shared, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		return s, log.String(), err
	}
	mkdir := func(p string, mode os.FileMode) string {
		if err := os.MkdirAll(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	checkDir := func(t *testing.T, p string, mode os.FileMode) {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || fi.Mode().Perm() != mode || st.Uid != 0 {
			t.Errorf("%s: %v, uid %d; want a directory of root, %v", p, fi.Mode(), st.Uid, mode)
		}
	}

	t.Run("reachable data directory", func(t *testing.T) {
		data := mkdir(filepath.Join(open, "reachable"), 0o755)
		s, log, err := start(t, data, filepath.Join(open, "unused", "execute"))
		if err != nil {
			t.Fatal(err)
		}
		if s.ExecuteDir() != filepath.Join(data, "execute") || strings.Contains(log, "level=WARN") {
			t.Errorf("execute directory %s; log:\n%s", s.ExecuteDir(), log)
		}
		checkDir(t, s.ExecuteDir(), 0o711)
	})

	t.Run("private data directory", func(t *testing.T) {
		private := mkdir(filepath.Join(open, "work", ".pond"), 0o700)
		data := mkdir(filepath.Join(private, "local", "nodes", "node1"), 0o700)
		secret := filepath.Join(data, "node.token")
		if err := os.WriteFile(secret, []byte("token"), 0o600); err != nil {
			t.Fatal(err)
		}
		shared := filepath.Join(open, "lib", "execute")
		s, log, err := start(t, data, shared)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(s.ExecuteDir()) != shared || !strings.HasPrefix(filepath.Base(s.ExecuteDir()), "node1-") ||
			strings.Contains(log, "level=WARN") || !strings.Contains(log, "execute="+s.ExecuteDir()) {
			t.Errorf("execute directory %s; log:\n%s", s.ExecuteDir(), log)
		}
		checkDir(t, shared, 0o711)
		checkDir(t, s.ExecuteDir(), 0o711)
		if !traversable(s.ExecuteDir(), stranger) || traversable(data, stranger) {
			t.Errorf("a job user reaches the execute directory: %v, the data directory: %v; want true, false",
				traversable(s.ExecuteDir(), stranger), traversable(data, stranger))
		}
		if fi, err := os.Stat(private); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf(".pond is %v (%v), want 0700 still", fi.Mode(), err)
		}
		// Another data directory, another execute directory.
		other := mkdir(filepath.Join(private, "local", "nodes", "node2"), 0o700)
		s2, _, err := start(t, other, shared)
		if err != nil || s2.ExecuteDir() == s.ExecuteDir() {
			t.Errorf("a second data directory: %v, execute %s", err, s2.ExecuteDir())
		}
	})

	t.Run("shared root a local user made first", func(t *testing.T) {
		data := mkdir(filepath.Join(open, "p2", ".pond", "node1"), 0o700)
		os.Chmod(filepath.Dir(data), 0o700)
		for name, plant := range map[string]func(p string){
			"a directory of another user": func(p string) {
				mkdir(p, 0o777)
				if err := os.Chown(p, 65534, 65534); err != nil {
					t.Fatal(err)
				}
			},
			"a link": func(p string) {
				if err := os.Symlink(mkdir(filepath.Join(open, "elsewhere"), 0o777), p); err != nil {
					t.Fatal(err)
				}
			},
		} {
			t.Run(name, func(t *testing.T) {
				lib := mkdir(filepath.Join(open, "planted", strings.ReplaceAll(name, " ", "_")), 0o755)
				shared := filepath.Join(lib, "execute")
				plant(shared)
				_, _, err := start(t, data, shared)
				if err == nil || !strings.Contains(err.Error(), "refusing it") || !strings.Contains(err.Error(), shared) {
					t.Errorf("New: %v, want a refusal of %s", err, shared)
				}
			})
		}
	})
}
