package acceptance

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRelaunchOnNewPorts kills a worker's agent while it runs a job and
// takes its API port (a listener that never answers, as a process that
// took the port would be), then applies: the worker starts again on new
// ports once the sea sees its earlier process gone, and stays up (on new
// ports at once it lost serf's name conflict to the dead one and shut
// down), and its job, which died with the agent, runs again within
// seconds rather than after its job lease: the worker's new startd, found
// through the collector, does not hold the job's claim.
func TestRelaunchOnNewPorts(t *testing.T) {
	t.Parallel()
	w, cm := poolWithRunningJob(t, "executable = /bin/sleep\narguments = 300\nlog = job.log\nrequirements = (Machine == \"reap-1\")\nqueue\n")
	var node struct {
		API string `json:"api"`
	}
	raw, err := os.ReadFile(filepath.Join(w.dir, ".pond", "local", "journal", "reap-1.json"))
	if err == nil {
		err = json.Unmarshal(raw, &node)
	}
	if err != nil || node.API == "" {
		t.Fatalf("the worker's journal entry: %v %s", err, raw)
	}
	killNode(t, w, "reap-1")
	var taken net.Listener
	eventually(t, 20*time.Second, func() error {
		var err error
		taken, err = net.Listen("tcp", node.API)
		return err
	})
	defer taken.Close()
	w.expect(0, "apply", "-auto-approve")
	if got := w.output("cm"); got != cm {
		t.Fatalf("the central manager moved: %s", got)
	}
	// The worker is up a while later, at a new address.
	time.Sleep(3 * time.Second)
	if n := len(agentPIDs(w.dir)); n != 2 {
		t.Fatalf("%d agents run after the apply, want 2: the relaunched worker shut down", n)
	}
	eventually(t, 90*time.Second, func() error {
		log := readFile(t, filepath.Join(w.dir, "job.log"))
		if strings.Count(log, "\n001 (") != 2 || !strings.Contains(log, "\n024 (") {
			return fmt.Errorf("want the job's reconnection failed and a second execution:\n%s", log)
		}
		return nil
	})
	if r := w.expect(0, "condor", "q", "-pool", cm, "-af", "JobStatus", "RemoteHost"); strings.TrimSpace(r.stdout) != "2 slot1@reap-1" {
		t.Errorf("the job after the relaunch: %q, want running on the worker again", r.stdout)
	}
}
