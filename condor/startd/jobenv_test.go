package startd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// TestJobCondorEnv runs a job on a dynamic slot and checks that it finds
// what HTCondor's starter gives a job: _CONDOR_SLOT (slot1_1),
// _CONDOR_SCRATCH_DIR, and _CONDOR_JOB_AD and _CONDOR_MACHINE_AD naming
// files of its own ad and its slot's; the ads' files are not sent back as
// output.
func TestJobCondorEnv(t *testing.T) {
	fs := &fakeSchedd{}
	schedd := fs.serve(t)
	// The job meets the test in the host's /tmp, which MOUNT_UNDER_SCRATCH
	// would hide from it.
	s := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "1024", "STARTER_POLL_INTERVAL": "0.05", "MOUNT_UNDER_SCRATCH": ""})
	// Where the job, perhaps a slot user, leaves what it found.
	out, err := os.MkdirTemp("", "jobenv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claim, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: testJob(nil), Schedd: schedd})
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nenv > " + out + "/env\ncat \"$_CONDOR_JOB_AD\" > " + out + "/job\ncat \"$_CONDOR_MACHINE_AD\" > " + out + "/machine\necho made > result\n"
	if err := os.WriteFile(filepath.Join(out, "job.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	job := testJob(map[string]string{"Cmd": `"` + out + `/job.sh"`, "TransferExecutable": "false", "ClusterId": "7", "ProcId": "3"})
	if _, err := s.Activate(ctx, &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "7.3", Job: job}); err != nil {
		t.Fatal(err)
	}
	var final *wire.JobReport
	for deadline := time.Now().Add(30 * time.Second); final == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		fs.mu.Lock()
		for _, r := range fs.reports {
			if r.Kind != wire.ReportUpdate {
				final = &r
			}
		}
		fs.mu.Unlock()
	}
	if final == nil || final.Kind != wire.ReportExited || final.ExitCode != 0 {
		t.Fatalf("final report %+v", final)
	}
	env := map[string]string{}
	b, err := os.ReadFile(filepath.Join(out, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	scratch := env["_CONDOR_SCRATCH_DIR"]
	if env["_CONDOR_SLOT"] != "slot1_1" || scratch == "" {
		t.Errorf("_CONDOR_SLOT = %q, _CONDOR_SCRATCH_DIR = %q", env["_CONDOR_SLOT"], scratch)
	}
	for k, name := range map[string]string{"_CONDOR_JOB_AD": JobAdFile, "_CONDOR_MACHINE_AD": MachineAdFile} {
		if env[k] != filepath.Join(scratch, name) {
			t.Errorf("%s = %q, want %s in the scratch directory %s", k, env[k], name, scratch)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "job")); !strings.Contains(string(b), "ClusterId = 7\n") || !strings.Contains(string(b), "ProcId = 3\n") {
		t.Errorf("the job ad file:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "machine")); !strings.Contains(string(b), `Name = "slot1_1@`) || !strings.Contains(string(b), "Memory = 100\n") {
		t.Errorf("the machine ad file:\n%s", b)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, ok := fs.outputs["result"]; !ok {
		t.Errorf("the job's output was not sent: %v", fs.outputs)
	}
	for k := range fs.outputs {
		if strings.Contains(k, ".ad") {
			t.Errorf("the ad file %s was sent back as output", k)
		}
	}
}
