package providers

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pond-htc/pond/overlay/api"
)

// TestSeaKey: the first call makes .pond/auth/gossip.key, a key of `pondctl
// sea keygen`'s kind, mode 0600 in private directories; later calls, and
// ReadSeaKey, return the same key; POND_AUTHORITY moves it with the
// authority.
func TestSeaKey(t *testing.T) {
	t.Setenv("POND_AUTHORITY", "")
	wd := t.TempDir()
	if _, err := ReadSeaKey(wd); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadSeaKey before any key: %v, want one that wraps fs.ErrNotExist", err)
	}
	key, err := SeaKey(wd)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := api.ParseGossipKey(key); err != nil || len(b) != 32 {
		t.Fatalf("key %q: %d bytes, %v", key, len(b), err)
	}
	path := filepath.Join(wd, ".pond", "auth", SeaKeyFile)
	if SeaKeyPath(wd) != path {
		t.Errorf("SeaKeyPath = %s, want %s", SeaKeyPath(wd), path)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700, filepath.Join(wd, ".pond"): 0o700} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != key+"\n" {
		t.Errorf("the file holds %q, %v", data, err)
	}
	for range 2 {
		if again, err := SeaKey(wd); err != nil || again != key {
			t.Fatalf("SeaKey again: %q, %v; want %q", again, err, key)
		}
	}
	if got, err := ReadSeaKey(wd); err != nil || got != key {
		t.Fatalf("ReadSeaKey: %q, %v", got, err)
	}

	elsewhere := filepath.Join(t.TempDir(), "authority")
	t.Setenv("POND_AUTHORITY", elsewhere)
	other, err := SeaKey(wd)
	if err != nil || other == key {
		t.Fatalf("with POND_AUTHORITY: %q, %v", other, err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, SeaKeyFile)); err != nil {
		t.Errorf("the key is not in POND_AUTHORITY: %v", err)
	}
}

// TestSeaKeyRefused: a key file open to others, not a key, or not a
// file is refused, with the file named, and left as it is.
func TestSeaKeyRefused(t *testing.T) {
	t.Setenv("POND_AUTHORITY", "")
	for _, tc := range []struct {
		name  string
		setup func(path string) error
		want  string
	}{
		{"open to others", func(path string) error {
			key, _ := api.GossipKeyGen()
			if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
				return err
			}
			return os.Chmod(path, 0o644)
		}, "has mode 0644: others than its owner may read it"},
		{"not a key", func(path string) error { return os.WriteFile(path, []byte("c2hvcnQ=\n"), 0o600) }, "encryption key is 5 bytes"},
		{"empty", func(path string) error { return os.WriteFile(path, nil, 0o600) }, "encryption key is 0 bytes"},
		{"a directory", func(path string) error { return os.Mkdir(path, 0o700) }, "is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := t.TempDir()
			path := SeaKeyPath(wd)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.setup(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			_, err := SeaKey(wd)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("SeaKey: %v, want an error naming %s with %q", err, path, tc.want)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Errorf("the file changed from %q to %q", before, after)
			}
		})
	}
}

// seaKeyChildEnv makes the test binary a process that prints the sea key
// of the working directory the variable names (TestSeaKeyChild).
const seaKeyChildEnv = "POND_TEST_SEA_KEY_DIR"

func TestSeaKeyChild(t *testing.T) {
	wd := os.Getenv(seaKeyChildEnv)
	if wd == "" {
		t.Skip("run by TestSeaKeyAtOnce")
	}
	key, err := SeaKey(wd)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("KEY %s\n", key)
}

// TestSeaKeyAtOnce: providers that need the key at the same moment, as
// goroutines and as processes of their own, all get the same key, the one
// in the file.
func TestSeaKeyAtOnce(t *testing.T) {
	t.Setenv("POND_AUTHORITY", "")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		wd := t.TempDir()
		const n = 4
		keys := make([]string, 2*n)
		errs := make([]error, 2*n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { keys[i], errs[i] = SeaKey(wd) })
			wg.Go(func() {
				cmd := exec.Command(exe, "-test.run=^TestSeaKeyChild$", "-test.v")
				cmd.Env = append(os.Environ(), seaKeyChildEnv+"="+wd)
				out, err := cmd.CombinedOutput()
				if err != nil {
					errs[n+i] = fmt.Errorf("%w: %s", err, out)
					return
				}
				for _, l := range strings.Split(string(out), "\n") {
					if k, ok := strings.CutPrefix(l, "KEY "); ok {
						keys[n+i] = k
					}
				}
			})
		}
		wg.Wait()
		file, err := ReadSeaKey(wd)
		if err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			if errs[i] != nil || keys[i] != file {
				t.Fatalf("round %d, caller %d: %q, %v; the file holds %q", round, i, keys[i], errs[i], file)
			}
		}
		entries, _ := os.ReadDir(filepath.Dir(SeaKeyPath(wd)))
		if len(entries) != 1 {
			t.Errorf("round %d: the authority directory holds %d entries, want the key alone", round, len(entries))
		}
	}
}
