package daemon_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/joblog"
)

// TestChangingInputIsHeld runs a job whose input file keeps changing
// while the schedd sends it: each attempt is refused by the schedd
// itself, and after the last one the job is held with a reason that names
// the file, in the queue and in the job log; the job never runs.
func TestChangingInputIsHeld(t *testing.T) {
	t.Parallel()
	cm, _ := pool(t, 1, nil)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.dat")
	if err := os.WriteFile(in, bytes.Repeat([]byte("x"), 16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	// Something keeps appending to the input.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		f, err := os.OpenFile(in, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = f.WriteString("more\n")
			time.Sleep(100 * time.Microsecond)
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	submitFile(t, cm, dir, "executable = /bin/cat\narguments = in.dat\ntransfer_executable = false\ntransfer_input_files = in.dat\n"+
		"output = out.txt\nlog = job.log\nqueue\n")
	testpool.Eventually(t, 60*time.Second, "the job to be held", func() bool {
		jobs := queued(t, cm.Client())
		return len(jobs) == 1 && jobs[0].Ad["JobStatus"] == "5"
	})
	j := queued(t, cm.Client())[0]
	const want = "Error from shadow: transfer input file in.dat: in.dat changed while it was transferred (3 attempts)"
	if reason := j.Ad["HoldReason"]; !strings.Contains(reason, want) || j.Ad["HoldReasonCode"] != "13" {
		t.Errorf("HoldReason %s, HoldReasonCode %s; want %q and 13", reason, j.Ad["HoldReasonCode"], want)
	}
	f, err := os.Open(filepath.Join(dir, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := joblog.ReadAll(f, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	var types []joblog.EventType
	for _, ev := range evs {
		types = append(types, ev.Type)
		if ev.Type == joblog.Held && !strings.Contains(ev.Message, want) {
			t.Errorf("the job log's hold event says %q, want %q", ev.Message, want)
		}
	}
	if wantTypes := []joblog.EventType{joblog.Submit, joblog.FileTransfer, joblog.Held}; !slices.Equal(types, wantTypes) {
		t.Errorf("job log events %v, want %v", types, wantTypes)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.txt")); err == nil {
		t.Error("the job ran with an input that changed")
	}
}
