package startd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
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
	// The claim's next job finds its own ads, complete, where the first
	// found the first's (written over the first's files when they were
	// kept for it).
	script2 := "#!/bin/sh\ncat \"$_CONDOR_JOB_AD\" > " + out + "/job2\ncat \"$_CONDOR_MACHINE_AD\" > " + out + "/machine2\nls -ln \"$_CONDOR_JOB_AD\" > " + out + "/mode2\n"
	if err := os.WriteFile(filepath.Join(out, "job2.sh"), []byte(script2), 0o755); err != nil {
		t.Fatal(err)
	}
	job2 := testJob(map[string]string{"Cmd": `"` + out + `/job2.sh"`, "TransferExecutable": "false", "ClusterId": "7", "ProcId": "4"})
	if _, err := s.Activate(ctx, &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "7.4", Job: job2}); err != nil {
		t.Fatal(err)
	}
	final = nil
	for deadline := time.Now().Add(30 * time.Second); final == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		fs.mu.Lock()
		for _, r := range fs.reports {
			if r.Kind != wire.ReportUpdate && r.JobID == "7.4" {
				final = &r
			}
		}
		fs.mu.Unlock()
	}
	if final == nil || final.Kind != wire.ReportExited || final.ExitCode != 0 {
		t.Fatalf("the second job's final report %+v", final)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "job2")); !strings.Contains(string(b), "ProcId = 4\n") || strings.Contains(string(b), "ProcId = 3\n") {
		t.Errorf("the second job's ad file:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "machine2")); !strings.Contains(string(b), `Name = "slot1_1@`) {
		t.Errorf("the second job's machine ad file:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "mode2")); !strings.HasPrefix(string(b), "-rw------- 1 ") {
		t.Errorf("the second job's ad file is not a private file with one link: %s", b)
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

// TestCondorEnvAdFiles checks the job's and its slot's ad files: complete
// ads the job's user alone may read, written through no link planted in
// the scratch directory; in a directory made for the start anything in
// their way is an error, in one the job had already (a restart after a
// checkpoint) it is removed, never followed.
func TestCondorEnvAdFiles(t *testing.T) {
	job, err := classad.ParseOldAd("ClusterId = 7\nProcId = 3\nCmd = \"/bin/true\"\nRequirements = TARGET.Memory >= 16\n")
	if err != nil {
		t.Fatal(err)
	}
	machine, err := classad.ParseOldAd("Name = \"slot1_1@host\"\nMemory = 100\nStart = true\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		fresh   bool
		plant   string // what is at .job.ad before: "", "link", "file"
		wantErr bool
	}{
		{name: "fresh", fresh: true},
		{name: "fresh with a link in the way", fresh: true, plant: "link", wantErr: true},
		{name: "fresh with a file in the way", fresh: true, plant: "file", wantErr: true},
		{name: "restart with a link", plant: "link"},
		{name: "restart with the last run's file", plant: "file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(t.TempDir(), "target")
			if err := os.WriteFile(target, []byte("untouched"), 0o644); err != nil {
				t.Fatal(err)
			}
			switch tt.plant {
			case "link":
				if err := os.Symlink(target, filepath.Join(dir, JobAdFile)); err != nil {
					t.Fatal(err)
				}
			case "file":
				if err := os.WriteFile(filepath.Join(dir, JobAdFile), []byte("ClusterId = 1\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			env, err := condorEnv([]string{"A=b"}, dir, tt.fresh, job, machine, "slot1_1@host")
			if b, _ := os.ReadFile(target); string(b) != "untouched" {
				t.Errorf("the link's target was written: %q", b)
			}
			if tt.wantErr {
				if err == nil {
					t.Fatalf("condorEnv replaced what was in its way in a fresh directory; env %q", env)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"A=b", "_CONDOR_SLOT=slot1_1", "_CONDOR_JOB_AD=" + filepath.Join(dir, JobAdFile), "_CONDOR_MACHINE_AD=" + filepath.Join(dir, MachineAdFile)}
			if strings.Join(env, "\n") != strings.Join(want, "\n") {
				t.Errorf("env %q, want %q", env, want)
			}
			for name, ad := range map[string]*classad.Ad{JobAdFile: job, MachineAdFile: machine} {
				p := filepath.Join(dir, name)
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, want a regular file 0600", name, fi.Mode())
				}
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				got, err := classad.ParseOldAd(string(b))
				if err != nil {
					t.Fatalf("%s: %v\n%s", name, err, b)
				}
				if got.String() != ad.String() {
					t.Errorf("%s holds\n%s\nwant\n%s", name, got, ad)
				}
			}
		})
	}
}
