package factory

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// newTestHost is the Host of pool campus on a node of an open sea (no
// tokens, no TLS) whose central manager is cm:9618.
func newTestHost(t *testing.T, encrypt string) *Host {
	t.Helper()
	h, err := NewHost(HostConfig{Pool: "campus", DataDir: t.TempDir(), Binary: "/bin/pondctl", Encrypt: encrypt,
		Knob: func(string) (string, bool) { return "", false }, Source: &WirePool{CentralManager: func() string { return "127.0.0.1:1" }},
		CondorHost: func() string { return "cm:9618" }, GossipAddr: func() string { return "cm:7946" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Factory().Close() })
	return h
}

// TestHostRequest: a glidein of an open sea runs the agent's binary with
// an open API, joins the node's sea, reports to its central manager,
// offers the template's resources, and gets the sea's gossip key in its
// private configuration file only.
func TestHostRequest(t *testing.T) {
	const key = "2dzU8m6GuDHusXDtE8bLUE5uHpgGyHwFtKj5IvPSSG8="
	h := newTestHost(t, key)
	e := api.FactoryEntrySpec{Name: "hpc", Site: api.FactorySite{Kind: "slurm"},
		Template: api.FactoryTemplate{CPUs: 2, MemoryMB: 512, Slots: 2, Lifetime: api.Duration(time.Hour), Attributes: map[string]string{"HasCvmfs": "true"}}}
	id := api.FactoryPrefix("campus") + "hpc-1-abcd"
	req, err := h.Request(e, id)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(req.Args, " ")
	for _, want := range []string{"agent -name " + id + " -pool campus -condor-host cm:9618 -join cm:7946", "-glidein " + id,
		"-insecure-api", "-config {dir}/condor_config", "-attr HasCvmfs=true"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if req.Binary != "/bin/pondctl" || strings.Contains(args, key) {
		t.Errorf("binary %q, args %q", req.Binary, args)
	}
	if conf := string(req.Files["condor_config"]); conf != "NUM_CPUS = 2\nMEMORY = 512\nNUM_SLOTS = 2\nPOND_ENCRYPT = "+key+"\n" {
		t.Errorf("condor_config %q", conf)
	}
	if _, ok := req.Files[TokenFile]; ok {
		t.Error("a glidein of an open sea got a token")
	}
}

// TestHostCredentialsAndRoutes: a node of an open sea takes no delegated
// CA, nor credentials without a key, nor over plain HTTP; its routes
// refuse an entry the path does not name and keep one it does.
func TestHostCredentialsAndRoutes(t *testing.T) {
	h := newTestHost(t, "")
	for _, tc := range []struct {
		creds api.FactoryCredentials
		want  string
	}{
		{api.FactoryCredentials{}, "key: missing"},
		{api.FactoryCredentials{Key: "k", CA: "c"}, "ca: the agent speaks no TLS"},
		{api.FactoryCredentials{Key: "k"}, "the agent has no trusted keys"},
	} {
		if err := h.SetCredentials(tc.creds); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetCredentials(%+v) = %v, want %q", tc.creds, err, tc.want)
		}
	}
	if tokens, ca := h.Credentials(); tokens != nil || ca != nil {
		t.Errorf("credentials %v %v kept", tokens, ca)
	}
	mux := http.NewServeMux()
	for p, f := range h.Routes() {
		mux.HandleFunc(p, f)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(method, path, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Logf("%s %s: %s", method, path, b)
		}
		return resp.StatusCode
	}
	if code := do("PUT", api.PathFactoryCredentials, `{"key": "k"}`); code != http.StatusUpgradeRequired {
		t.Errorf("credentials over plain HTTP: %d", code)
	}
	entry := `{"name": "hpc", "site": {"kind": "slurm", "config": {"WorkDir": "/tmp"}}, "template": {"cpus": 1, "memory_mb": 512, "lifetime": "1h"}}`
	if code := do("PUT", api.PathFactoryEntries+"gpu", entry); code != http.StatusBadRequest {
		t.Errorf("an entry the path does not name: %d", code)
	}
	if code := do("PUT", api.PathFactoryEntries+"hpc", entry); code != http.StatusOK {
		t.Errorf("PUT entry: %d", code)
	}
	if st := h.Status(); len(st.Entries) != 1 || st.NeedsCredentials {
		t.Errorf("status %+v", st)
	}
	if code := do("DELETE", api.PathFactoryEntries+"hpc", ""); code != http.StatusOK || len(h.Status().Entries) != 0 {
		t.Errorf("DELETE entry: %d", code)
	}
}
