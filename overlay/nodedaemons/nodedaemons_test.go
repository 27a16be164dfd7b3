package nodedaemons

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/overlay/api"
)

// TestConfig checks the daemons' configuration: the DAEMON_LIST of the
// node's role unless its file sets one, the knobs set at run time over
// the file's, a pond's stamps appended to the file's STARTD_ATTRS, and a
// file that would show a secret in the machine ad refused.
func TestConfig(t *testing.T) {
	dir := t.TempDir()
	file := func(body string) string {
		path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+body[:4])
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	log := slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		name, role, pool, file string
		extra, stamps          map[string]string
		want                   map[string]string // knob -> value
		err                    string
	}{
		{name: "central manager", role: api.RoleCM, pool: "campus",
			want: map[string]string{"DAEMON_LIST": "MASTER COLLECTOR NEGOTIATOR SCHEDD STARTD"}},
		{name: "free node", role: "node",
			want: map[string]string{"DAEMON_LIST": "MASTER COLLECTOR NEGOTIATOR SCHEDD STARTD"}},
		{name: "pool member", role: "node", pool: "campus", extra: map[string]string{"CONDOR_HOST": "10.0.0.1:9000"},
			want: map[string]string{"DAEMON_LIST": "MASTER SCHEDD STARTD", "CONDOR_HOST": "10.0.0.1:9000"}},
		{name: "the file's list", role: "node", pool: "campus", file: "DAEMON_LIST = MASTER STARTD\n",
			want: map[string]string{"DAEMON_LIST": "MASTER STARTD"}},
		{name: "stamps", role: "node", file: "STARTD_ATTRS = Site\nSite = \"x\"\n", stamps: map[string]string{"PondName": `"p"`, "PondID": `"i"`},
			want: map[string]string{"STARTD_ATTRS": "Site PondID PondName", "PondName": `"p"`}},
		{name: "a secret in the ad", role: "node", file: "STARTD_ATTRS = POND_ENCRYPT_KEY\n", err: "holds a secret"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = file(tt.file)
			}
			c := New(path, tt.role, tt.pool, tt.extra, log)
			c.SetStamps(tt.stamps)
			cfg, err := c.Config()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Config: %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.want {
				if got, _ := cfg.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}
