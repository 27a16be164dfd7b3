// Package scheddtest runs a real schedd for the tests of its clients: the
// daemon itself, with its queue in a test's directory, served over
// HTTP on loopback.
package scheddtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
)

// New returns a schedd of host submit.example.org with its queue in a
// directory of t's, closed when t ends.
func New(t testing.TB) *schedd.Schedd {
	t.Helper()
	cfg := config.New(config.Options{Host: config.HostInfo{FullHostname: "submit.example.org", Hostname: "submit",
		IPAddress: "127.0.0.1", CPUs: 1, MemoryMB: 1024}})
	if err := cfg.ParseInto("test.cfg", []byte("UID_DOMAIN = example.org\nFILESYSTEM_DOMAIN = fs.example.org\n")); err != nil {
		t.Fatal(err)
	}
	s, err := schedd.New(context.Background(), schedd.Options{Config: cfg, Name: "schedd@submit", Address: "submit.example.org:9618",
		DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Serve serves mux over HTTP on loopback until t ends, and returns its
// address; with mounts, each path prefix (such as wire.PathPrefix +
// "schedd") serves its handler with the prefix stripped.
func Serve(t testing.TB, mounts map[string]http.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	for prefix, h := range mounts {
		mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// Submit queues, as owner, the jobs the submit description text
// describes at the schedd at addr.
func Submit(t testing.TB, addr, owner, text string) {
	t.Helper()
	dir := t.TempDir()
	f, err := submit.Parse(filepath.Join(dir, "job.sub"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tools.SubmitFile(context.Background(), wire.NewSchedd(addr, ""), f, submit.Options{Owner: owner, SubmitDir: dir,
		Env: []string{}, LookupEnv: func(string) (string, bool) { return "", false }}); err != nil {
		t.Fatalf("submit: %v", err)
	}
}
