package slurm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestDescribe checks that a site made again from its description (as a
// pilot factory's central manager makes it from an entry) is configured
// as the original.
func TestDescribe(t *testing.T) {
	cfg := Config{WorkDir: "/scratch/pond", Partition: "debug,long", Account: "physics", QOS: "normal",
		Constraint: "haswell", TimeLimit: 2 * time.Hour, Extra: []string{"--exclusive"},
		Commands: Commands{Sbatch: "/opt/slurm/bin/sbatch"}, Env: []string{"SLURM_CONF=/etc/slurm/x.conf"}}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testDescribe(t, s)
	// With a login node, over SSH.
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSH_AUTH_SOCK", "/nonexistent/agent")
	cfg.Login = &Login{Host: "login1", Port: 2222, User: "pond", KnownHostsFile: known, JumpHost: "bastion"}
	s, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testDescribe(t, s)
}

func testDescribe(t *testing.T, s *Site) {
	t.Helper()
	data, err := s.Describe()
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	again, err := New(back)
	if err != nil {
		t.Fatalf("the description %s makes no site: %v", data, err)
	}
	if !reflect.DeepEqual(again.cfg, s.cfg) {
		t.Fatalf("made again from %s: %+v, want %+v", data, again.cfg, s.cfg)
	}
}
