package acceptance

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ssh"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// TestSSHSiteRunsPondctl starts the built pondctl as a glidein on two SSH
// hosts (real sshd): the binary is copied once per host, runs there with
// its arguments, and the glideins end Done; Cancel removes them, and
// nothing of pond is left running on the hosts.
func TestSSHSiteRunsPondctl(t *testing.T) {
	t.Parallel()
	srv := sshtest.Start(t, 2)
	base := filepath.Join(srv.Dir, "base")
	site, err := ssh.New(ssh.Config{
		Hosts: srv.Hosts, User: srv.User, KeyFile: srv.KeyFile, KnownHosts: srv.KnownHosts,
		BaseDir: base, Slots: 2, Binary: pondBin, KillGrace: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	ctx := context.Background()
	if err := site.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	for _, id := range []string{"pond-v1", "pond-v2"} {
		if _, err := site.Submit(ctx, glidein.Request{ID: id, Binary: pondBin, Args: []string{"version"}, Lifetime: time.Minute}); err != nil {
			t.Fatalf("Submit %s: %v", id, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		gs, err := site.List(ctx, glidein.IDPrefix)
		if err != nil {
			t.Fatal(err)
		}
		ended := 0
		for _, g := range gs {
			if g.State.Ended() {
				ended++
			}
		}
		if ended == len(gs) && len(gs) == 2 {
			for _, g := range gs {
				if g.State != glidein.Done {
					t.Errorf("%s: %s (%s), want done", g.ID, g.State, g.Reason)
				}
				logs, _ := filepath.Glob(filepath.Join(base, "hosts", "*", g.ID, "glidein.log"))
				if len(logs) != 1 {
					t.Fatalf("%s: logs %v", g.ID, logs)
				}
				out, _ := os.ReadFile(logs[0])
				if !strings.Contains(string(out), "Pond v") {
					t.Errorf("%s logged %q, want pondctl's version", g.ID, out)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("glideins did not end: %+v", gs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	bins, _ := filepath.Glob(filepath.Join(base, "bin", "pondctl-*"))
	if len(bins) != 1 {
		t.Errorf("binaries on the hosts (which share a base directory): %v", bins)
	}
	for _, id := range []string{"pond-v1", "pond-v2"} {
		if err := site.Cancel(ctx, id); err != nil {
			t.Errorf("Cancel %s: %v", id, err)
		}
	}
	if gs, err := site.List(ctx, glidein.IDPrefix); err != nil || len(gs) != 0 {
		t.Errorf("List after Cancel: %+v, %v", gs, err)
	}
	if pids, _ := srv.Processes(); len(pids) != 0 {
		t.Errorf("processes left on the hosts: %v", pids)
	}
}
