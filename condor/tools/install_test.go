package tools_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/tools"
)

// TestWriteClientConfig checks the files client-config writes, their
// modes, that the configuration reads back with the pool and the
// credentials, the HTCondor token alone in the token directory HTCondor's
// clients read, and that nothing is replaced without Force.
func TestWriteClientConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "client")
	cc := tools.ClientConfig{Dir: dir, Pool: "10.1.2.3:4000", Token: "tok\n", HTCondorToken: "htok", CA: []byte("PEM"),
		Cert: []byte("CERT"), Key: []byte("KEY")}
	files, err := tools.WriteClientConfig(cc)
	if err != nil || len(files) != 6 {
		t.Fatalf("WriteClientConfig = %v, %v", files, err)
	}
	for _, f := range append(files, dir, filepath.Join(dir, "tokens.d")) {
		fi, err := os.Stat(f)
		want := os.FileMode(0o600)
		if fi != nil && fi.IsDir() {
			want = 0o700 | os.ModeDir
		}
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: %v, mode %v, want %v", f, err, fi.Mode(), want)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "condor_config"))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"CONDOR_HOST": "10.1.2.3:4000", "COLLECTOR_HOST": "10.1.2.3:4000", "POND_POOL_ADDR": "10.1.2.3:4000", "SCHEDD_HOST": "10.1.2.3:4000",
		"SEC_TOKEN_DIRECTORY": filepath.Join(dir, "tokens.d"), "POND_TOKEN_FILE": filepath.Join(dir, "pond.token"),
		"POND_TLS_CA": filepath.Join(dir, "ca.pem"), "SEC_CLIENT_AUTHENTICATION_METHODS": "IDTOKENS, SSL, FS",
		"AUTH_SSL_CLIENT_CAFILE": filepath.Join(dir, "ca.pem"), "AUTH_SSL_CLIENT_CERTFILE": filepath.Join(dir, "cert.pem"),
		"AUTH_SSL_CLIENT_KEYFILE": filepath.Join(dir, "key.pem"), "SSL_SKIP_HOST_CHECK": "true",
		"SEC_CLIENT_AUTHENTICATION": "REQUIRED", "SEC_CLIENT_INTEGRITY": "REQUIRED", "SEC_CLIENT_ENCRYPTION": "REQUIRED",
		"SEC_PASSWORD_DIRECTORY": filepath.Join(dir, "passwords.d"),
	} {
		if v, _ := cfg.Get(k); v != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "pond.token")); string(b) != "tok\n" {
		t.Errorf("pond's token file holds %q", b)
	}
	// HTCondor's clients offer every token of their directory: only the
	// HTCondor-format one is there.
	if ents, _ := os.ReadDir(filepath.Join(dir, "tokens.d")); len(ents) != 1 || ents[0].Name() != "pond" {
		t.Errorf("tokens.d holds %v, want the HTCondor token alone", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "tokens.d", "pond")); string(b) != "htok\n" {
		t.Errorf("HTCondor's token file holds %q", b)
	}
	// Not again without Force; with it, and a collector of its own.
	if _, err := tools.WriteClientConfig(cc); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("a second WriteClientConfig: %v", err)
	}
	cc.Force, cc.Collector, cc.CA, cc.Cert, cc.Key = true, "10.1.2.3:9618", nil, nil, nil
	if _, err := tools.WriteClientConfig(cc); err != nil {
		t.Fatal(err)
	}
	if cfg, err = config.Load(filepath.Join(dir, "condor_config")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"COLLECTOR_HOST", "SCHEDD_HOST"} {
		if v, _ := cfg.Get(k); v != "10.1.2.3:9618" {
			t.Errorf("%s = %q, want the collector's address", k, v)
		}
	}
	// An HTCondor token alone: pond's tools are given no token file.
	only := filepath.Join(t.TempDir(), "only")
	if _, err := tools.WriteClientConfig(tools.ClientConfig{Dir: only, Pool: "a:1", HTCondorToken: "htok"}); err != nil {
		t.Fatal(err)
	}
	if cfg, err = config.Load(filepath.Join(only, "condor_config")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"POND_TOKEN_FILE", "AUTH_SSL_CLIENT_CERTFILE"} {
		if v, ok := cfg.Get(k); ok {
			t.Errorf("%s = %q with no pond token nor certificate", k, v)
		}
	}
	if v, _ := cfg.Get("SEC_CLIENT_AUTHENTICATION_METHODS"); v != "IDTOKENS, FS" {
		t.Errorf("SEC_CLIENT_AUTHENTICATION_METHODS = %q without a certificate", v)
	}
	if _, err := os.Stat(filepath.Join(only, "pond.token")); err == nil {
		t.Error("a pond token file was written with no pond token")
	}
	for _, bad := range []tools.ClientConfig{
		{Dir: dir, Pool: "nohostport", Token: "t", Force: true},
		{Dir: dir, Pool: "a:1", Token: " ", HTCondorToken: "\n", Force: true},
		{Dir: dir, Pool: "a:1", HTCondorToken: "a\nSEC_CLIENT_AUTHENTICATION_METHODS = CLAIMTOBE", Force: true},
		{Dir: dir, Pool: "a:1", Token: "t", Cert: []byte("CERT"), Key: []byte("KEY"), Force: true},
		{Dir: dir, Pool: "a:1", Token: "t", CA: []byte("PEM"), Cert: []byte("CERT"), Force: true},
		{Dir: dir, Pool: "a:1\nCONDOR_HOST = evil:1", Token: "t", Force: true},
		{Dir: filepath.Join(dir, "condor_config"), Pool: "a:1", Token: "t"},
	} {
		if _, err := tools.WriteClientConfig(bad); err == nil {
			t.Errorf("WriteClientConfig(%+v): no error", bad)
		}
	}
	// A symbolic link where the token goes is refused, not followed.
	link := filepath.Join(t.TempDir(), "c2")
	os.MkdirAll(filepath.Join(link, "tokens.d"), 0o700)
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.Symlink(target, filepath.Join(link, "tokens.d", "pond"))
	if _, err := tools.WriteClientConfig(tools.ClientConfig{Dir: link, Pool: "a:1", HTCondorToken: "t", Force: true}); err == nil {
		t.Error("WriteClientConfig wrote through a symbolic link")
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("the link's target was written")
	}
}

// TestInstallLinks checks that the links are made, left when right,
// re-pointed when wrong, and that a file of a command's name is kept.
func TestInstallLinks(t *testing.T) {
	dir := t.TempDir()
	links, err := tools.InstallLinks(dir, "/opt/pond/pondctl")
	if err != nil || len(links) != len(tools.Commands()) {
		t.Fatalf("InstallLinks = %v, %v", links, err)
	}
	for n := range tools.Commands() {
		if to, err := os.Readlink(filepath.Join(dir, n)); err != nil || to != "/opt/pond/pondctl" {
			t.Errorf("%s -> %q, %v", n, to, err)
		}
	}
	os.Remove(filepath.Join(dir, "condor_q"))
	os.Symlink("/old/pondctl", filepath.Join(dir, "condor_q"))
	os.Remove(filepath.Join(dir, "condor_rm"))
	os.WriteFile(filepath.Join(dir, "condor_rm"), []byte("mine"), 0o755)
	links, err = tools.InstallLinks(dir, "/opt/pond/pondctl")
	if err == nil || !strings.Contains(err.Error(), "condor_rm exists and is not a symbolic link") {
		t.Errorf("InstallLinks over a file: %v", err)
	}
	changed := 0
	for _, l := range links {
		if l.Changed {
			changed++
			if filepath.Base(l.Path) != "condor_q" {
				t.Errorf("%s changed", l.Path)
			}
		}
	}
	if to, _ := os.Readlink(filepath.Join(dir, "condor_q")); changed != 1 || to != "/opt/pond/pondctl" {
		t.Errorf("condor_q -> %q after %d changes", to, changed)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "condor_rm")); string(b) != "mine" {
		t.Errorf("condor_rm replaced: %q", b)
	}
}
