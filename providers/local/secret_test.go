package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestPoolSecret checks that a working directory's pools share one secret,
// created once with mode 0600 and named in every node's configuration, that
// another working directory gets another, and that a secret file others can
// read is refused.
func TestPoolSecret(t *testing.T) {
	wd := t.TempDir()
	p := configured(t, wd)
	s := create(t, p, "pool.a", poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(2)}))
	defer destroy(t, p, "pool.a", s)

	path := filepath.Join(wd, ".pond", "pool_password")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no pool secret after creating a pool: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("pool secret has mode %04o, want 0600", fi.Mode().Perm())
	}
	secret, err := os.ReadFile(path)
	if err != nil || len(strings.TrimSpace(string(secret))) < 32 {
		t.Fatalf("pool secret %q, %v: want at least 32 characters", secret, err)
	}
	for _, d := range s.GetAttr("node_details").AsValueSlice() {
		name := d.GetAttr("name").AsString()
		cfg, err := os.ReadFile(filepath.Join(p.dataDir(name), ConfigFileName))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cfg), "SEC_POOL_PASSWORD_FILE = "+path+"\n") {
			t.Errorf("%s's configuration does not name the pool secret:\n%s", name, cfg)
		}
		args, _ := os.ReadFile("/proc/" + d.GetAttr("pid").AsBigFloat().Text('f', 0) + "/cmdline")
		if strings.Contains(string(args), strings.TrimSpace(string(secret))) {
			t.Errorf("%s: the secret is visible on the command line", name)
		}
	}

	// A second pool of the directory, by a later run, reuses the secret.
	p2 := configured(t, wd)
	s2 := create(t, p2, "pool.b", poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(1)}))
	defer destroy(t, p2, "pool.b", s2)
	if again, _ := os.ReadFile(path); string(again) != string(secret) {
		t.Error("a later run replaced the pool secret")
	}

	// Another working directory has a secret of its own.
	other := t.TempDir()
	po := configured(t, other)
	so := create(t, po, "pool.c", poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(1)}))
	defer destroy(t, po, "pool.c", so)
	if theirs, _ := os.ReadFile(filepath.Join(other, ".pond", "pool_password")); string(theirs) == string(secret) || len(theirs) == 0 {
		t.Error("two working directories share a pool secret")
	}
}

func TestPoolSecretRefused(t *testing.T) {
	for _, tt := range []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"readable by others", "abc\n", 0o644, "readable by others"},
		{"empty", "\n", 0o600, "empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wd := t.TempDir()
			path := filepath.Join(wd, ".pond", "pool_password")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tt.content), tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			p := configured(t, wd)
			_, err := p.poolSecret()
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("poolSecret: %v; want an error naming %s and saying %q", err, path, tt.want)
			}
		})
	}
}
