package slurm_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/slurm"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
)

// TestUnreachableController runs the site's Slurm commands with a
// SLURM_CONF whose controller nothing answers for: each error says which
// command, which SLURM_CONF, which controller host and port it names, and
// then what Slurm said.
func TestUnreachableController(t *testing.T) {
	slurmtest.Require(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "slurm.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`ClusterName=gone
SlurmctldHost=ctl(127.0.0.1)
SlurmctldPort=%s
AuthType=auth/munge
MessageTimeout=2
TCPTimeout=2
NodeName=n1 CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=n1 Default=YES
`, port)), 0o644); err != nil {
		t.Fatal(err)
	}
	site := func(c slurm.Commands) *slurm.Site {
		s, err := slurm.New(slurm.Config{WorkDir: filepath.Join(dir, "work"), Env: []string{"SLURM_CONF=" + conf}, Commands: c})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := ctxFor(t)
	for _, tc := range []struct {
		name, command string
		run           func() error
	}{
		{"check", "scontrol", func() error { return site(slurm.Commands{}).Check(ctx) }},
		{"list", "squeue", func() error { _, err := site(slurm.Commands{}).List(ctx, glidein.IDPrefix); return err }},
		// squeue answers (nothing queued), so that Submit gets to sbatch.
		{"submit", "sbatch", func() error {
			_, err := site(slurm.Commands{Squeue: "/bin/true"}).Submit(ctx, glidein.Request{ID: glidein.IDPrefix + "x1", Binary: writeAgent(t)})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil {
				t.Fatal("no error with the controller unreachable")
			}
			if testing.Verbose() {
				t.Log(err)
			}
			for _, want := range []string{
				tc.command + " could not reach the Slurm controller: ",
				fmt.Sprintf("SLURM_CONF=%s names the controller 127.0.0.1:%s (SlurmctldHost, SlurmctldPort)", conf, port),
				"Unable to contact slurm controller",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q lacks %q", err, want)
				}
			}
		})
	}
}
