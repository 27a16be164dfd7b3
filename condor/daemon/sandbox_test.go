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
// file outside their scratch directory through a symbolic link: each is
// held with a reason that names the file, and the file's content comes
// back nowhere.
func TestOutputTransferStaysInSandbox(t *testing.T) {
	cm, _ := pool(t, 1, nil)
	secret := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secret, []byte("root:secret-hash"), 0o644); err != nil {
		t.Fatal(err)
	}
	jobs := map[string]struct{ script, files, reason string }{
		"output file": {"ln -s " + secret + " result", "transfer_output_files = result\n",
			"transfer of output file result failed: result is a symbolic link that leads out of"},
		"stdout": {"echo hi; rm _condor_stdout; ln -s " + secret + " _condor_stdout", "",
			"reading job stdout: _condor_stdout is a symbolic link that leads out of"},
		"dot dot": {"true", "transfer_output_files = ../../shadow\n", "../../shadow leads out of"},
		"fifo":    {"mkfifo pipe", "transfer_output_files = pipe\n", "pipe is a special file"},
	}
	dirs := map[string]string{}
	for name, j := range jobs {
		dir := filepath.Join(t.TempDir(), strings.ReplaceAll(name, " ", "_"))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
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
		if !strings.Contains(j.Ad["HoldReason"], jobs[name].reason) || j.Ad["HoldReasonCode"] != "12" {
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
}
