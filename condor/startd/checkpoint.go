package startd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/confine"
	"github.com/pond-htc/pond/condor/wire"
)

// checkpointExitCode is the job's CheckpointExitCode (checkpoint_exit_code):
// the exit code with which the job says it wrote a checkpoint.
func checkpointExitCode(job *classad.Ad) (int, bool) {
	v, ok := job.EvalAttr("CheckpointExitCode").IntValue()
	return int(v), ok
}

// transfersOnEvict says whether the job's output goes back when it is
// evicted too (WhenToTransferOutput ON_EXIT_OR_EVICT): its checkpoint
// files, kept in the schedd's spool for its next start.
func transfersOnEvict(job *classad.Ad) bool {
	w, _ := job.EvalAttr("WhenToTransferOutput").StringValue()
	return strings.EqualFold(w, "ON_EXIT_OR_EVICT")
}

// checkpointOutputs lists the files of the job's checkpoint number n in
// its scratch directory dir: its standard streams (unless it has none)
// and the files TransferCheckpoint lists, else those TransferOutput
// lists, else every regular file it created or changed, and the files of
// the checkpoint it resumed from. Every name stays inside dir (confine).
// Run with the job user's rights.
func checkpointOutputs(dir string, job *classad.Ad, req *wire.ActivateRequest, inputs map[string]staged, n int64) ([]output, error) {
	var outs []output
	if list, ok := job.EvalAttr("TransferCheckpoint").StringValue(); ok && list != "" {
		for _, std := range []struct{ attr, stream, file string }{{"Out", wire.StreamStdout, "_condor_stdout"}, {"Err", wire.StreamStderr, "_condor_stderr"}} {
			if p, _ := job.EvalAttr(std.attr).StringValue(); p != "" && p != "/dev/null" {
				outs = append(outs, output{hdr: wire.TransferHeader{ClaimID: req.ClaimID, JobID: req.JobID, Stream: std.stream}, rel: std.file})
			}
		}
		for _, name := range config.SplitFileList(list) {
			rel, err := confine.Local(dir, name)
			if err != nil {
				return nil, fmt.Errorf("transfer of checkpoint file %s failed: %w", name, err)
			}
			outs = append(outs, output{hdr: wire.TransferHeader{ClaimID: req.ClaimID, JobID: req.JobID, Name: filepath.Base(name)}, rel: rel})
		}
	} else {
		var err error
		if outs, err = outputs(dir, job, req, originalInputs(job, inputs)); err != nil {
			return nil, err
		}
	}
	for i := range outs {
		outs[i].hdr.Checkpoint = n
	}
	return outs, nil
}

// originalInputs are the input files of inputs the job itself transfers
// in (its executable, stdin and transfer_input_files): the others came
// from the checkpoint it resumed from, and belong to its next checkpoint
// even when unchanged.
func originalInputs(job *classad.Ad, inputs map[string]staged) map[string]staged {
	own := map[string]bool{ExecutableName: true}
	if in, _ := job.EvalAttr("In").StringValue(); in != "" {
		own[filepath.Base(in)] = true
	}
	if list, ok := job.EvalAttr("TransferInput").StringValue(); ok {
		for _, f := range config.SplitFileList(list) {
			own[filepath.Base(f)] = true
		}
	}
	kept := map[string]staged{}
	for name, st := range inputs {
		if own[name] {
			kept[name] = st
		}
	}
	return kept
}

// nextCheckpoint is the number of the job's next checkpoint: one more
// than its last, the job's NumCkpts when it started.
func nextCheckpoint(job *classad.Ad, w *watch) int64 {
	if w.checkpoints == 0 {
		n, _ := job.EvalAttr("NumCkpts").IntValue()
		w.checkpoints = max(n, 0)
	}
	return w.checkpoints + 1
}

// ckptOutcome is how a checkpoint's transfer ended.
type ckptOutcome int

const (
	ckptKept    ckptOutcome = iota // the schedd keeps it
	ckptRefused                    // the schedd cannot keep it: the job is held
	ckptLost                       // the schedd no longer holds the claim
)

// sendCheckpoint sends the job's checkpoint number n (checkpointOutputs)
// to the claim's schedd, then the report that makes it the job's in the
// schedd's spool. wall is how long the job has run on the claim. A
// checkpoint whose files did not all arrive is sent again, twice at
// most; one the schedd cannot keep (too big) is refused, with why.
func (s *Startd) sendCheckpoint(ctx context.Context, sl *slot, r *run, job *classad.Ad, req *wire.ActivateRequest, dir string, inputs map[string]staged, n int64, wall time.Duration) (ckptOutcome, string) {
	var err error
	for range 3 {
		report := &wire.JobReport{ClaimID: req.ClaimID, JobID: req.JobID, Kind: wire.ReportCheckpoint, Startd: s.Address(),
			SlotName: sl.name, Checkpoint: n, WallClock: wall.Seconds()}
		err = s.sendFiles(ctx, sl, r, dir, req, func() ([]output, error) { return checkpointOutputs(dir, job, req, inputs, n) }, report)
		switch {
		case errors.Is(err, errClaimLost):
			return ckptLost, err.Error()
		case err != nil:
			return ckptRefused, err.Error()
		}
		if err = s.reportCheckpoint(ctx, sl, report); err == nil {
			s.log.Info("the job checkpointed", "job", req.JobID, "slot", sl.name, "checkpoint", n, "files", len(report.Outputs))
			return ckptKept, ""
		}
		var we *wire.Error
		switch {
		case errors.Is(err, errClaimLost):
			return ckptLost, err.Error()
		case errors.As(err, &we) && we.Status == http.StatusPreconditionFailed:
			s.log.Warn("the schedd asks for the job's checkpoint again", "job", req.JobID, "checkpoint", n, "err", err)
			continue
		case errors.As(err, &we):
			return ckptRefused, we.Msg
		}
		return ckptRefused, err.Error()
	}
	return ckptRefused, err.Error()
}

// reportCheckpoint sends a checkpoint's report, retrying while the
// schedd is unreachable for REPORT_RETRY_TIME.
func (s *Startd) reportCheckpoint(ctx context.Context, sl *slot, report *wire.JobReport) error {
	limit, _ := s.opts.Config.Duration("REPORT_RETRY_TIME", 10*time.Minute)
	deadline := time.Now().Add(limit)
	backoff := 50 * time.Millisecond
	for {
		s.mu.Lock()
		schedd := sl.schedd
		s.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := s.peer(schedd).Schedd().JobReport(rctx, report)
		cancel()
		var we *wire.Error
		switch {
		case err == nil:
			return nil
		case errors.As(err, &we) && (we.Status == http.StatusNotFound || we.Status == http.StatusConflict):
			return fmt.Errorf("%w: %w", errClaimLost, err)
		case errors.As(err, &we) && we.Status < 500:
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("%w: %w", errClaimLost, ctx.Err())
		case time.Now().After(deadline):
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// checkpointAndRestart handles a job that exited with its
// CheckpointExitCode: its checkpoint goes to the schedd's spool, then the
// job starts again in the same scratch directory, with the same
// arguments, and goes on running under its claim. It reports whether the
// job runs again; when it does not, the job ends as r says (held when
// the schedd cannot keep the checkpoint, vacated when the claim is gone
// or the job was stopped meanwhile).
func (s *Startd) checkpointAndRestart(sl *slot, r *run, job *classad.Ad, req *wire.ActivateRequest, dir string, inputs map[string]staged, w *watch, report *wire.JobReport) bool {
	st := r.sup.final
	code, ok := checkpointExitCode(job)
	if !ok || st == nil || st.Signal != 0 || st.ExitCode != code || r.held.Load() || r.vacated.Load() || r.wasKilled() {
		return false
	}
	n := nextCheckpoint(job, w)
	ctx, cancel := context.WithCancel(s.stop)
	defer cancel()
	stopAlive := s.keepAlive(sl, req, cancel)
	outcome, why := s.sendCheckpoint(ctx, sl, r, job, req, dir, inputs, n, time.Since(w.started))
	stopAlive()
	switch outcome {
	case ckptLost:
		s.log.Warn("not restarting a checkpointed job whose claim its schedd no longer holds", "job", req.JobID, "slot", sl.name, "err", why)
		r.vacated.Store(true)
		r.kill("claim lost")
		return false
	case ckptRefused:
		r.held.Store(true)
		report.HoldReason = "Error from " + sl.name + ": the job's checkpoint could not be kept: " + why
		report.HoldCode, report.HoldSubCode = 12, 2
		return false
	}
	w.checkpoints = n
	w.renew(time.Now())
	if st := r.sup.final; st != nil {
		w.priorUser += st.UserCPU
		w.priorSys += st.SysCPU
		w.peakRSS = max(w.peakRSS, st.MaxRSSKB)
	}
	if r.vacated.Load() {
		// Vacated while its checkpoint went out: it stops here, and
		// resumes from that checkpoint wherever it starts next.
		return false
	}
	s.mu.Lock()
	machineAd := s.slotAd(sl)
	s.mu.Unlock()
	r.restarts.Add(1)
	// The run's private temporary directories go with it: the next run
	// gets its own, as a job's next start does.
	if err := os.RemoveAll(nsDir(dir)); err != nil {
		s.log.Warn("removing the private temporary directories of a checkpointed run", "job", req.JobID, "err", err)
	}
	err := s.prepare(r, dir, false, job, machineAd, sl.name, req, r.user)
	switch {
	case errors.Is(err, errStartStopped):
		return false
	case err != nil:
		r.held.Store(true)
		report.HoldReason = "Error from starter on " + sl.name + ": restarting the job after its checkpoint: " + err.Error()
		report.HoldCode, report.HoldSubCode = 6, 2
		return false
	}
	return true
}

// checkpointOnEvict sends the checkpoint of a job evicted with
// WhenToTransferOutput ON_EXIT_OR_EVICT to the schedd's spool, before the
// job's eviction is reported: its next start resumes from it. A
// checkpoint that cannot be sent leaves the job's previous one.
func (s *Startd) checkpointOnEvict(ctx context.Context, sl *slot, r *run, job *classad.Ad, req *wire.ActivateRequest, dir string, inputs map[string]staged, w *watch) {
	if !transfersOnEvict(job) {
		return
	}
	n := nextCheckpoint(job, w)
	if outcome, why := s.sendCheckpoint(ctx, sl, r, job, req, dir, inputs, n, time.Since(w.started)); outcome != ckptKept {
		s.log.Warn("the evicted job's checkpoint was not kept; its previous one stays", "job", req.JobID, "slot", sl.name, "err", why)
	}
}

// openAppend opens a job's standard stream file to write on at its end,
// creating it if need be. The job had its scratch directory: a link, or
// anything but a regular file of one link, is refused rather than
// followed.
func openAppend(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || ok && st.Nlink != 1 {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file of its own", filepath.Base(p))
	}
	return f, nil
}

// waitExit returns a channel closed once sup's job has ended.
func waitExit(sup *supervisor) <-chan struct{} {
	exited := make(chan struct{})
	go func() {
		sup.wait()
		close(exited)
	}()
	return exited
}
