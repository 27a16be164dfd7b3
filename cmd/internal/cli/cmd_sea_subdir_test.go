package cli

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// TestSeaFromSubdirectory checks that pondctl sea, run in a subdirectory
// of the working directory that made a sea, calls the sea's agents over
// TLS with the working directory's CA and a token of its authority, as
// pondctl condor does.
func TestSeaFromSubdirectory(t *testing.T) {
	dir := t.TempDir()
	a, err := auth.OpenAuthority(filepath.Join(dir, filepath.FromSlash(auth.AuthorityDir)))
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	certFile, keyFile, caFile, err := a.WriteCertificate(certDir, "cm", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.CAFile()); err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := auth.ServerTLS(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	var authorized atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, err := a.Verifier().Verify(tok); err == nil {
			authorized.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode([]any{})
	}))
	srv.Listener = tls.NewListener(srv.Listener, tlsCfg)
	srv.Start()
	defer srv.Close()

	sub := filepath.Join(dir, "jobs", "today")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := pondctl(t, sub, []string{"HOME=" + dir}, "sea", "members", "-no-color", "-sea", srv.Listener.Addr().String())
	if strings.Contains(stderr, "plain HTTP") {
		t.Fatalf("sea members from a subdirectory called the agent in plain HTTP (exit %d):\n%s", code, stderr)
	}
	if authorized.Load() == 0 {
		t.Fatalf("the agent saw no token of the working directory's authority (exit %d)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestOutputWithoutState checks that output in a directory with no state
// says there is no state, not that an output is missing.
func TestOutputWithoutState(t *testing.T) {
	dir := configDir(t, `output "cm" { value = "x" }`)
	code, _, stderr := pondctl(t, dir, nil, "output", "-no-color", "cm")
	if code != 1 || !strings.Contains(stderr, "No state") || !strings.Contains(stderr, "no state at pond.state") ||
		strings.Contains(stderr, "not found") {
		t.Errorf("output cm without state: exit %d\n%s", code, stderr)
	}
	code, _, stderr = pondctl(t, dir, nil, "output", "-no-color")
	if code != 0 || !strings.Contains(stderr, "No outputs found: there is no state at pond.state") {
		t.Errorf("output without state: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := pondctl(t, dir, nil, "output", "-json")
	if code != 0 || strings.TrimSpace(stdout) != "{}" {
		t.Errorf("output -json without state: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestDiagnosticsRelativePaths checks that diagnostics name the
// configuration's files relative to the working directory, in text and
// in JSON.
func TestDiagnosticsRelativePaths(t *testing.T) {
	dir := configDir(t, "pool \"p\" {\n  nodes = \"x\"\n}\n")
	code, _, stderr := pondctl(t, dir, nil, "validate", "-no-color")
	if code != 1 || !strings.Contains(stderr, "on main.pond.hcl line 2") || strings.Contains(stderr, dir) {
		t.Errorf("validate: exit %d\n%s", code, stderr)
	}
	code, stdout, _ := pondctl(t, dir, nil, "validate", "-json")
	if code != 1 || !strings.Contains(stdout, `"filename": "main.pond.hcl"`) || strings.Contains(stdout, dir) {
		t.Errorf("validate -json: exit %d\n%s", code, stdout)
	}
}
