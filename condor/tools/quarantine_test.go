package tools_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/condor/wire"
)

// TestQuarantineTool quarantines a node that cannot start a job (its
// execute directory broken; one such failure suffices here) and checks that condor_status shows it with its
// reason, that condor_quarantine lists it (as a table and as JSON), that
// a user may not lift it and an administrator may.
func TestQuarantineTool(t *testing.T) {
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"})
	hole := testpool.Start(t, "hole", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr,
		startd.KnobBlackholeFailures: "1", startd.KnobQuarantineTime: "3600"})
	// A file where its execute directory should be: it cannot start a
	// job, its own fault.
	execute := hole.Master.Startd().ExecuteDir()
	if err := os.RemoveAll(execute); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(execute, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	alice := testpool.Token(t, "alice", auth.Write)
	p := &pool{t: t, dir: dir, env: []string{"POND_POOL_ADDR=" + cm.Addr, "POND_TOKEN=" + alice, "USER=alice", "PWD=" + dir}}
	sub := filepath.Join(dir, "job.sub")
	if err := os.WriteFile(sub, []byte("executable = /bin/false\nqueue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.must("submit", sub)
	testpool.Eventually(t, 30*time.Second, "the node to be quarantined", func() bool {
		return strings.Contains(p.must("status"), "Quarantined machines")
	})
	out := p.must("status")
	if !strings.Contains(out, "hole") || !strings.Contains(out, "1 jobs in a row could not start") || !strings.Contains(out, "not a directory") {
		t.Errorf("condor_status does not show the quarantine and its reason:\n%s", out)
	}
	if out := p.must("quarantine"); !strings.Contains(out, "hole: quarantined until ") || !strings.Contains(out, "not a directory") {
		t.Errorf("condor_quarantine printed:\n%s", out)
	}
	var list []wire.QuarantineResponse
	if err := json.Unmarshal([]byte(p.must("quarantine", "-json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Machine != "hole" || !list[0].Quarantined || time.Until(list[0].Until) < 50*time.Minute {
		t.Errorf("condor_quarantine -json: %+v", list)
	}
	if _, errs, code := p.run("quarantine", "-lift", "hole"); code != 1 || !strings.Contains(errs, "not permitted") {
		t.Errorf("a user lifted a quarantine: exit %d, %s", code, errs)
	}
	if _, errs, code := p.run("quarantine", "-lift"); code != 1 || !strings.Contains(errs, "needs the names") {
		t.Errorf("-lift without a machine: exit %d, %s", code, errs)
	}
	if _, errs, code := p.run("quarantine", "-lift", "nonesuch"); code != 1 || !strings.Contains(errs, `no machine "nonesuch"`) {
		t.Errorf("-lift of an unknown machine: exit %d, %s", code, errs)
	}
	p.env = append(p.env, "POND_TOKEN="+testpool.Token(t, "admin", auth.Administrator))
	if out := p.must("quarantine", "-lift", "hole"); !strings.Contains(out, "hole: quarantine lifted") {
		t.Errorf("condor_quarantine -lift printed:\n%s", out)
	}
	testpool.Eventually(t, 20*time.Second, "the quarantine to leave the ads", func() bool {
		return strings.Contains(p.must("quarantine"), "No machine is quarantined.")
	})
}
