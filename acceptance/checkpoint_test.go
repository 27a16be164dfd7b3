package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ckptJob counts to 12, a step a second, keeping its count in the file
// state, and exits with the checkpoint exit code 85 every 2 steps: each
// start reads the count it resumes from.
const ckptJob = `#!/bin/sh
n=0
if [ -f state ]; then n=$(cat state); fi
echo "start $n pid $$"
while [ "$n" -lt 12 ]; do
  sleep 1
  n=$((n + 1))
  echo "$n" > state.new && mv state.new state
  echo "step $n"
  if [ $((n % 2)) -eq 0 ] && [ "$n" -lt 12 ]; then exit 85; fi
done
echo "done $n"
`

// ckptDirs lists the checkpoint directories the schedd keeps for a job
// (SPOOL/checkpoints/CLUSTER.PROC/N) below root.
func ckptDirs(root, job string) []string {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && filepath.Base(filepath.Dir(p)) == job && filepath.Base(filepath.Dir(filepath.Dir(p))) == "checkpoints" {
			dirs = append(dirs, p)
		}
		return nil
	})
	return dirs
}

// TestCheckpointResume runs a self-checkpointing job (checkpoint_exit_code)
// on a pool's one slot and evicts it with a job the machine's RANK
// prefers: it checkpoints every 2 s without ending (no terminate event,
// NumCkpts grows), resumes after the eviction from the checkpoint that
// reached the schedd's spool, not from the start, and completes exactly
// once with the count right; the spool keeps one checkpoint of it at a
// time and none once it completed.
func TestCheckpointResume(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	cm := w.applyPool(preemptPool("ckptpre", ""))
	w.writeExec("count.sh", ckptJob)
	w.write("ckpt.sub", "executable = count.sh\noutput = count.out\nerror = count.err\nlog = jobs.log\n"+
		"should_transfer_files = YES\ntransfer_output_files = state\ncheckpoint_exit_code = 85\nqueue\n")
	w.write("pref.sub", preferredSub)
	w.expect(0, "condor", "submit", "-pool", cm, "ckpt.sub")
	// Let it checkpoint twice at least, in place.
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "JobStatus", "NumCkpts", "HoldReason")
		f := strings.Fields(r.stdout)
		if len(f) < 2 || f[0] != "2" {
			return fmt.Errorf("the job does not run: %s", r)
		}
		if n, _ := strconv.Atoi(f[1]); n < 2 {
			return fmt.Errorf("the job has %s checkpoints", f[1])
		}
		return nil
	})
	if evs := events(t, filepath.Join(w.dir, "jobs.log")); count(evs["001"], "005") != 0 || count(evs["001"], "001") != 1 {
		t.Fatalf("a checkpoint ended or restarted the job: %v", evs)
	}
	if d := ckptDirs(w.dir, "1.0"); len(d) != 1 {
		t.Errorf("the spool keeps %d checkpoints of the job, want 1: %v", len(d), d)
	}
	w.expect(0, "condor", "submit", "-pool", cm, "pref.sub")
	log := filepath.Join(w.dir, "jobs.log")
	eventually(t, 30*time.Second, func() error {
		if evs := events(t, log); count(evs["001"], "004") == 0 {
			return fmt.Errorf("the job was not evicted: %v", evs)
		}
		return nil
	})
	// What the spool holds now is what the job resumes from: its output
	// so far, with each start's pid, and its count.
	r := w.run("condor", "q", "-pool", cm, "1.0", "-af", "NumCkpts")
	if n, _ := strconv.Atoi(strings.TrimSpace(r.stdout)); n < 2 {
		t.Fatalf("NumCkpts %q at the eviction, want 2 or more", r.stdout)
	}
	dirs := ckptDirs(w.dir, "1.0")
	if len(dirs) != 1 {
		t.Fatalf("the spool keeps %d checkpoints of the evicted job, want 1: %v", len(dirs), dirs)
	}
	spooled := readFile(t, filepath.Join(dirs[0], "_condor_stdout"))
	steps := regexp.MustCompile(`(?m)^step (\d+)$`).FindAllStringSubmatch(spooled, -1)
	if len(steps) < 2 {
		t.Fatalf("the spooled checkpoint's output has %d steps:\n%s", len(steps), spooled)
	}
	last := steps[len(steps)-1][1]
	waitEmpty(t, w, cm)
	evs := events(t, log)
	if count(evs["001"], "005") != 1 || count(evs["001"], "004") != 1 || count(evs["002"], "005") != 1 {
		t.Fatalf("events %v; want the checkpointing job evicted once and ended once:\n%s", evs, readFile(t, log))
	}
	out := readFile(t, filepath.Join(w.dir, "count.out"))
	// The job went on from that checkpoint: its output is the spooled
	// one, then a start from the step it had checkpointed.
	if !strings.HasPrefix(out, spooled) || !strings.HasPrefix(out[len(spooled):], "start "+last+" pid ") {
		t.Errorf("the job did not resume from its checkpoint at step %s:\n--- spooled at the eviction\n%s--- its output\n%s", last, spooled, out)
	}
	if c := strings.Count(out, "start 0 "); c != 1 {
		t.Errorf("the job started from scratch %d times, want once:\n%s", c, out)
	}
	for i := 1; i <= 12; i++ {
		if c := strings.Count(out, fmt.Sprintf("step %d\n", i)); c != 1 {
			t.Errorf("step %d appears %d times in the job's output, want once:\n%s", i, c, out)
		}
	}
	if strings.Count(out, "done 12\n") != 1 {
		t.Errorf("the job did not end once at 12:\n%s", out)
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(w.dir, "state"))); got != "12" {
		t.Errorf("final state %q, want 12", got)
	}
	h := w.expect(0, "condor", "history", "-pool", cm, "1.0", "-af", "NumCkpts", "CommittedTime", "NumJobCompletions")
	f := strings.Fields(h.stdout)
	if len(f) != 3 || f[0] != "5" && f[0] < "5" || f[2] != "1" {
		t.Errorf("history NumCkpts CommittedTime NumJobCompletions = %q; want 5 checkpoints or more, one completion", h.stdout)
	}
	if ct, _ := strconv.Atoi(f[1]); len(f) == 3 && ct < 10 {
		t.Errorf("CommittedTime %s, want the 12 s of counting or about", f[1])
	}
	if d := ckptDirs(w.dir, "1.0"); len(d) != 0 {
		t.Errorf("the spool keeps the completed job's checkpoints: %v", d)
	}
}
