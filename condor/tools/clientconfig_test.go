package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/wire"
)

// TestClientConfig asks a node for its central manager and prints the
// configuration HTCondor's clients need; it refuses options it does not
// take and a node that knows no central manager.
func TestClientConfig(t *testing.T) {
	cm := "10.1.2.3:9618"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.PathPrefix+"master/info" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(wire.MasterInfo{Name: "node3", CondorHost: cm})
	}))
	defer srv.Close()
	env := []string{"POND_TOKEN=t", "PWD=" + t.TempDir()}
	tests := []struct {
		name   string
		args   []string
		cm     string
		code   int
		stdout []string
		stderr string
	}{
		{"prints", []string{"-pool", srv.Listener.Addr().String()}, cm, 0,
			[]string{"\nCONDOR_HOST = 10.1.2.3:9618\n", "\nCOLLECTOR_HOST = $(CONDOR_HOST)\n", "\nSEC_CLIENT_AUTHENTICATION_METHODS = FS\n",
				"\nSEC_CLIENT_ENCRYPTION = REQUIRED\n"}, ""},
		{"unknown option", []string{"-pool", srv.Listener.Addr().String(), "-schedd"}, cm, 1, nil, "unexpected -schedd"},
		{"argument", []string{"-pool", srv.Listener.Addr().String(), "extra"}, cm, 1, nil, "unexpected extra"},
		{"no pool", nil, cm, 1, nil, "no pool given"},
		{"no central manager", []string{"-pool", srv.Listener.Addr().String()}, "", 1, nil, "knows no central manager"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm = tt.cm
			var out, errb bytes.Buffer
			code := ClientConfig(context.Background(), tt.args, &out, &errb, env)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tt.code, errb.String())
			}
			for _, want := range tt.stdout {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			if tt.stderr != "" && !strings.Contains(errb.String(), tt.stderr) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.stderr)
			}
			if tt.code != 0 && out.Len() != 0 {
				t.Errorf("printed on failure: %s", out.String())
			}
		})
	}
}
