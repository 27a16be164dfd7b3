package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon/testpool"
)

// TestOutputTransferStaysInSandbox runs jobs that point their outputs at a
// file outside their scratch directory through a symbolic link, or whose
// Iwd has links out of it where the schedd reads inputs or writes
// outputs: each is held with a reason that names the file, and the file
// is neither transferred nor written.
func TestOutputTransferStaysInSandbox(t *testing.T) {
	t.Parallel()
	cm, _ := pool(t, 1, nil)
	secret := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secret, []byte("root:secret-hash"), 0o644); err != nil {
		t.Fatal(err)
	}
	type job struct {
		script, files, reason, code string
		link                        string // a link to the secret in the job's Iwd
	}
	jobs := map[string]job{
		"output file": {script: "ln -s " + secret + " result", files: "transfer_output_files = result\n", code: "12",
			reason: "transfer of output file result failed: result is a symbolic link that leads out of"},
		"stdout": {script: "echo hi; rm _condor_stdout; ln -s " + secret + " _condor_stdout", code: "12",
			reason: "reading job stdout: _condor_stdout is a symbolic link that leads out of"},
		"dot dot": {script: "true", files: "transfer_output_files = ../../shadow\n", code: "12", reason: "../../shadow leads out of"},
		"fifo":    {script: "mkfifo pipe", files: "transfer_output_files = pipe\n", code: "12", reason: "pipe is a special file"},
		// The schedd's side: it writes the outputs into the Iwd and reads
		// the inputs from it.
		"output in Iwd": {script: "echo hi", link: "out.txt", code: "12",
			reason: "Error from shadow: writing Out: out.txt is a symbolic link that leads out of"},
		"input in Iwd": {script: "true", files: "transfer_input_files = in.txt\n", link: "in.txt", code: "13",
			reason: "Error from shadow: transfer input file in.txt: in.txt is a symbolic link that leads out of"},
	}
	dirs := map[string]string{}
	for name, j := range jobs {
		dir := filepath.Join(t.TempDir(), strings.ReplaceAll(name, " ", "_"))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if j.link != "" {
			if err := os.Symlink(secret, filepath.Join(dir, j.link)); err != nil {
				t.Fatal(err)
			}
		}
		cluster := submitFile(t, cm, dir, "executable = /bin/sh\narguments = \"-c '"+j.script+"'\"\ntransfer_executable = false\n"+
			"output = out.txt\nerror = err.txt\n"+j.files+"queue\n")
		dirs[fmt.Sprintf("%d.0", cluster)] = name
	}
	testpool.Eventually(t, 60*time.Second, "the jobs to be held", func() bool {
		held := 0
		for _, j := range queued(t, cm.Client()) {
			if j.Ad["JobStatus"] == "5" {
				held++
			}
		}
		return held == len(jobs)
	})
	for _, j := range queued(t, cm.Client()) {
		name := dirs[j.ID]
		if !strings.Contains(j.Ad["HoldReason"], jobs[name].reason) || j.Ad["HoldReasonCode"] != jobs[name].code {
			t.Errorf("%s: HoldReason %s, HoldReasonCode %s; want %q", name, j.Ad["HoldReason"], j.Ad["HoldReasonCode"], jobs[name].reason)
		}
	}
	_ = filepath.WalkDir(filepath.Dir(filepath.Dir(secret)), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && p != secret {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "secret-hash") {
				t.Errorf("the secret came back in %s", p)
			}
		}
		return nil
	})
	if b, _ := os.ReadFile(secret); string(b) != "root:secret-hash" {
		t.Errorf("the secret was overwritten: %q", b)
	}
}
