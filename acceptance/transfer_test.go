package acceptance

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/testenv"
)

// transferPool is a local pool of two agents with one slot each.
const transferPool = `
pool "xfer" {
  nodes  = 2
  slots  = 1
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.xfer.central_manager
}
`

// transferScript checksums its input and writes an output as large, the
// input with a line of its own at the end.
const transferScript = `#!/bin/sh
sha256sum big.in | cut -d' ' -f1 > in.sum
{ cat big.in; echo "tail $1"; } > big.out
`

const transferSubmit = `
executable              = xfer.sh
arguments               = $(Process)
transfer_input_files    = big.in
transfer_output_files   = in.sum, big.out
should_transfer_files   = YES
when_to_transfer_output = ON_EXIT
output                  = xfer.out
error                   = xfer.err
log                     = xfer.log
request_memory          = 64
queue
`

// transferSize is the size of the transferred input and output: 200 MiB,
// or POND_TRANSFER_MIB MiB (2048 to measure the agents' memory while 2 GiB
// files are transferred, see docs/performance.md).
func transferSize(t *testing.T) int64 {
	t.Helper()
	v := os.Getenv("POND_TRANSFER_MIB")
	if v == "" {
		return 200 << 20
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 4 {
		t.Fatalf("POND_TRANSFER_MIB=%q: want a number of MiB, at least 4", v)
	}
	return n << 20
}

// TestLargeFileTransfer sends a job a 200 MiB input (a sparse file with
// random blocks; see transferSize) and gets a 200 MiB output back through a real pool: the
// job sees its input whole (its checksum), the output arrives whole (its
// checksum), no agent's peak resident memory grows by anything near the
// files' size, and the job log has HTCondor's transfer events, in order,
// as HTCondor's own reader reads them.
func TestLargeFileTransfer(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", transferPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")

	in := filepath.Join(w.dir, "big.in")
	size := transferSize(t)
	inSum, outSum := bigInput(t, in, size)
	w.write("xfer.sub", transferSubmit)
	if err := os.WriteFile(filepath.Join(w.dir, "xfer.sh"), []byte(transferScript), 0o755); err != nil {
		t.Fatal(err)
	}
	base := peakRSS(t, w)
	var mu sync.Mutex
	peak := map[int]int64{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			for pid, kb := range peakRSS(t, w) {
				mu.Lock()
				peak[pid] = max(peak[pid], kb)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	start := time.Now()
	r := w.expect(0, "condor", "submit", "-pool", cm, "xfer.sub")
	if !strings.Contains(r.stdout, "1 job(s) submitted to cluster 1.") {
		t.Fatalf("submit output:\n%s", r.stdout)
	}
	eventually(t, 180*time.Second+time.Duration(size>>20)*100*time.Millisecond, func() error {
		r := w.run("condor", "history", "-pool", cm, "-af", "ProcId", "JobStatus", "ExitCode")
		if r.code != 0 {
			return fmt.Errorf("condor history: %s", r)
		}
		if strings.TrimSpace(r.stdout) != "0 4 0" {
			q := w.run("condor", "q", "-pool", cm, "-af", "ProcId", "JobStatus", "HoldReason")
			return fmt.Errorf("job 1.0 not completed: history %q, queue %q", r.stdout, q.stdout)
		}
		return nil
	})
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()

	if got := strings.TrimSpace(readFile(t, filepath.Join(w.dir, "in.sum"))); got != inSum {
		t.Errorf("the job saw an input with SHA-256 %s, the submitter's is %s", got, inSum)
	}
	if got := fileSum(t, filepath.Join(w.dir, "big.out")); got != outSum {
		t.Errorf("the output arrived with SHA-256 %s, the job wrote %s", got, outSum)
	}
	ents, err := os.ReadDir(w.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".partial") {
			t.Errorf("a partial output is left in the job's directory: %s", e.Name())
		}
	}
	var growth int64
	for pid, kb := range peak {
		growth = max(growth, kb-base[pid])
	}
	var top int64
	for _, kb := range peak {
		top = max(top, kb)
	}
	t.Logf("%d MiB in and %d MiB out in %s; the agents' peak resident memory (VmHWM) was at most %d MiB, %d MiB more than before the job", size>>20, size>>20,
		elapsed.Round(time.Millisecond), top>>10, growth>>10)
	if growth > 64<<10 {
		t.Errorf("an agent's peak resident memory grew by %d MiB while %d MiB files were transferred", growth>>10, size>>20)
	}

	// The job log: input transferred before the job executes, output
	// after, as HTCondor writes it.
	f, err := os.Open(filepath.Join(w.dir, "xfer.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := joblog.ReadAll(f, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, ev := range evs {
		s := fmt.Sprintf("%03d", int(ev.Type))
		if ev.Type == joblog.FileTransfer {
			s += "/" + strconv.Itoa(ev.TransferKind)
		}
		seq = append(seq, s)
	}
	want := "000 040/2 040/3 001 040/5 040/6 006 005"
	if got := strings.Join(seq, " "); got != want {
		t.Errorf("job log events %s, want %s", got, want)
	}
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.LogOrFail(t, "HTCondor's Python bindings (htcondor2) are not installed: the job log is not checked with HTCondor's reader (pip install htcondor)")
	} else {
		script := `
import sys
import htcondor2
for e in htcondor2.JobEventLog(sys.argv[1]).events(stop_after=0):
    print(e.type.name, e.get("Type", ""))
`
		out, err := exec.Command("python3", "-c", script, filepath.Join(w.dir, "xfer.log")).CombinedOutput()
		if err != nil {
			t.Fatalf("HTCondor's reader failed on the job log: %v\n%s", err, out)
		}
		got := strings.Join(strings.Fields(string(out)), " ")
		if want := "SUBMIT FILE_TRANSFER 2 FILE_TRANSFER 3 EXECUTE FILE_TRANSFER 5 FILE_TRANSFER 6 IMAGE_SIZE JOB_TERMINATED"; got != want {
			t.Errorf("HTCondor's reader reads %s, want %s", got, want)
		}
	}
	w.expect(0, "destroy", "-auto-approve")
}

// bigInput makes the sparse file p of size bytes with random blocks at
// its start, middle and end, and returns its SHA-256 and that of the
// output the job makes of it.
func bigInput(t *testing.T, p string, size int64) (in, out string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 1<<20)
	for _, off := range []int64{0, size / 2, size - int64(len(block))} {
		_, _ = rand.Read(block)
		if _, err := f.WriteAt(block, off); err != nil {
			t.Fatal(err)
		}
	}
	hi, ho := sha256.New(), sha256.New()
	if _, err := io.Copy(io.MultiWriter(hi, ho), io.NewSectionReader(f, 0, size)); err != nil {
		t.Fatal(err)
	}
	io.WriteString(ho, "tail 0\n")
	return hex.EncodeToString(hi.Sum(nil)), hex.EncodeToString(ho.Sum(nil))
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// peakRSS returns the peak resident memory (VmHWM, KiB) of each agent of
// the working directory.
func peakRSS(t *testing.T, w *workdir) map[int]int64 {
	t.Helper()
	out := map[int]int64{}
	for _, pid := range agentPIDs(w.dir) {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				out[pid] = kb
			}
		}
		f.Close()
	}
	return out
}
