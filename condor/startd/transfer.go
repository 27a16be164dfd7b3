package startd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/internal/confine"
	"github.com/pond-htc/pond/condor/internal/xfer"
	"github.com/pond-htc/pond/condor/wire"
)

// stage is the scratch directory of a job whose input files are being
// received, before the job is activated.
type stage struct {
	jobID     string
	dir       string
	files     map[string]staged // input files received whole, by name
	receiving int               // transfers in progress
}

// staged is an input file received whole.
type staged struct {
	info  wire.FileInfo
	mtime time.Time // once in place: an output with the same is the input, unchanged
}

// partialPrefix starts the names of input files being received.
const partialPrefix = ".pond-partial-"

// sandbox is the scratch directory of job jobID on slot sl.
func (s *Startd) sandbox(sl *slot, jobID string) string {
	return filepath.Join(s.executeDir(), "dir_"+strings.ReplaceAll(sl.name, "@", "_")+"_"+strings.ReplaceAll(jobID, ".", "_"))
}

// dropStageLocked forgets sl's stage and removes its directory in the
// background; s.mu must be held.
func (s *Startd) dropStageLocked(sl *slot) {
	st := sl.stage
	if st == nil {
		return
	}
	sl.stage = nil
	// Out of the way at once, so that a stage made at the same path
	// next cannot lose files to the removal.
	gone := st.dir + ".gone-" + newClaimID()[:8]
	if err := os.Rename(st.dir, gone); err != nil {
		gone = st.dir
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = os.RemoveAll(gone)
	}()
}

// ReceiveInput takes one of a job's input files from the schedd that
// holds the job's claim (a transfer stream, see wire.TransferReader) and
// puts it in the job's scratch directory, under its name, only once the
// whole file arrived with the checksum the schedd computed. A file for a
// claim the startd does not hold, or whose slot already runs a job, is
// refused; a stream cut short leaves nothing behind.
func (s *Startd) ReceiveInput(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		wire.WriteError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s needs POST", r.URL.Path))
		return
	}
	info, err := s.receiveInput(w, r)
	if err != nil {
		status := wire.ErrorStatus(err)
		if errors.Is(err, wire.ErrChecksum) || errors.Is(err, wire.ErrAborted) {
			status = http.StatusBadRequest
		}
		wire.WriteError(w, status, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, info)
}

func (s *Startd) receiveInput(w http.ResponseWriter, r *http.Request) (*wire.FileInfo, error) {
	rc := http.NewResponseController(w)
	tr, err := wire.NewTransferReader(r.Body, func() error { return rc.SetReadDeadline(time.Now().Add(xfer.DefaultStall)) })
	if err != nil {
		return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	hdr := tr.Header()
	name := hdr.Name
	if hdr.Stream != "" || name == "" || name != filepath.Base(name) || name == "." || name == ".." || strings.HasPrefix(name, partialPrefix) {
		return nil, fmt.Errorf("%w: input file name %q is not a plain file name", wire.ErrBadRequest, name)
	}
	s.mu.Lock()
	sl := s.claims[hdr.ClaimID]
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: startd is shutting down", wire.ErrConflict)
	case sl == nil || sl.partitionable:
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: unknown claim id", wire.ErrNotFound)
	case sl.run != nil:
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: slot %s runs job %s", wire.ErrConflict, sl.name, sl.jobID)
	}
	if err := s.refusalLocked(nil); err != nil {
		// Quarantined or retiring: the job would be refused; its input
		// need not come.
		s.mu.Unlock()
		return nil, err
	}
	if sl.stage == nil || sl.stage.jobID != hdr.JobID {
		s.dropStageLocked(sl)
		st := &stage{jobID: hdr.JobID, dir: s.sandbox(sl, hdr.JobID), files: map[string]staged{}}
		if err := newSandbox(st.dir); err != nil {
			s.mu.Unlock()
			return nil, s.inputFault(sl, hdr.JobID, err)
		}
		sl.stage = st
	}
	st := sl.stage
	st.receiving++
	sl.entered = time.Now()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		st.receiving--
		sl.entered = time.Now()
		s.mu.Unlock()
	}()
	f, err := os.CreateTemp(st.dir, partialPrefix+"*")
	if err != nil {
		return nil, s.inputFault(sl, hdr.JobID, fmt.Errorf("receiving input file %s: %w", name, err))
	}
	tmp := f.Name()
	keep := false
	defer func() {
		if !keep {
			_ = os.Remove(tmp)
		}
	}()
	info, err := xfer.Receive(tr, f, nil)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == tmp {
		// Writing the file failed (a full disk), not the stream.
		return nil, s.inputFault(sl, hdr.JobID, fmt.Errorf("receiving input file %s: %w", name, err))
	}
	if err != nil {
		return nil, fmt.Errorf("receiving input file %s: %w", name, err)
	}
	mode := os.FileMode(0o644)
	if hdr.Executable || name == ExecutableName {
		mode = 0o755
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return nil, s.inputFault(sl, hdr.JobID, fmt.Errorf("receiving input file %s: %w", name, err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl.stage != st || s.claims[hdr.ClaimID] != sl {
		return nil, fmt.Errorf("%w: the claim moved on while input file %s arrived", wire.ErrConflict, name)
	}
	final := filepath.Join(st.dir, name)
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("receiving input file %s: %w", name, err)
	}
	keep = true
	fi, err := os.Lstat(final)
	if err != nil {
		return nil, fmt.Errorf("receiving input file %s: %w", name, err)
	}
	st.files[name] = staged{info: info, mtime: fi.ModTime()}
	return &info, nil
}

// inputFault is a job's input file the machine could not write into its
// scratch directory (a full disk, a broken file system): the machine's
// fault, not the job's, as when it cannot start the job. It counts
// against the machine's health, and the schedd is told the machine
// refuses the job (wire.ErrConflict), which goes back to the queue
// uncharged.
func (s *Startd) inputFault(sl *slot, jobID string, err error) error {
	s.log.Warn("the machine could not write a job's input", "job", jobID, "slot", sl.name, "err", err)
	report := &wire.JobReport{JobID: jobID, Kind: wire.ReportEvicted, SlotName: sl.name,
		Reason: "Error from starter on " + sl.name + ": " + err.Error()}
	s.mu.Lock()
	quarantined := s.noteOutcomeLocked(report, true)
	s.mu.Unlock()
	if quarantined {
		s.quarantineChanged()
	}
	return fmt.Errorf("%w: the machine could not write the job's input: %w", wire.ErrConflict, err)
}

// newSandbox creates the scratch directory dir. What an earlier run left
// in dir (the startd stopped before cleaning it) is removed first: it was
// the job's, and may hold links where the startd is about to write.
func newSandbox(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing old scratch directory: %w", err)
	}
	// The job's own: no other job user may read it.
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("creating scratch directory: %w", err)
	}
	return nil
}

// takeStageLocked checks that sl's stage holds every input file req
// lists, whole, and hands its directory to the job; with no inputs it
// names a fresh directory, which the caller makes (newSandbox) once it no
// longer holds s.mu. s.mu must be held.
func (s *Startd) takeStageLocked(sl *slot, req *wire.ActivateRequest) (dir string, inputs map[string]staged, fresh bool, err error) {
	st := sl.stage
	if st != nil && st.jobID != req.JobID {
		s.dropStageLocked(sl)
		st = nil
	}
	if st == nil {
		if len(req.Inputs) > 0 {
			return "", nil, false, fmt.Errorf("%w: slot %s has received none of job %s's input files", wire.ErrConflict, sl.name, req.JobID)
		}
		return s.sandbox(sl, req.JobID), nil, true, nil
	}
	if st.receiving > 0 {
		return "", nil, false, fmt.Errorf("%w: slot %s is still receiving job %s's input files", wire.ErrConflict, sl.name, req.JobID)
	}
	for _, in := range req.Inputs {
		got, ok := st.files[in.Name]
		if !ok || got.info.Size != in.Size || got.info.SHA256 != in.SHA256 {
			return "", nil, false, fmt.Errorf("%w: slot %s does not hold input file %s of job %s whole (%d bytes, SHA-256 %s)",
				wire.ErrConflict, sl.name, in.Name, req.JobID, in.Size, in.SHA256)
		}
	}
	sl.stage = nil
	return st.dir, st.files, false, nil
}

// output is a file the starter sends back: a stream or an output file,
// found at rel in the scratch directory.
type output struct {
	hdr     wire.TransferHeader
	rel     string
	scanned bool // found in the directory, not named by TransferOutput
}

// open opens the output inside the scratch directory root, with an error
// that names it.
func (o output) open(root *os.Root) (*os.File, error) {
	f, err := confine.Open(root, o.rel)
	switch {
	case err == nil:
		return f, nil
	case o.hdr.Stream != "":
		return nil, fmt.Errorf("reading job %s: %w", o.hdr.Stream, err)
	case o.scanned:
		return nil, fmt.Errorf("reading output file %s: %w", o.rel, err)
	}
	return nil, fmt.Errorf("transfer of output file %s failed: %w", o.rel, err)
}

// outputs lists what the job sends back from its scratch directory dir:
// its stdout and stderr (unless it has none), and its output files, those
// TransferOutput lists or else the regular files it created or changed
// (not its input files as they arrived). Every name stays inside dir
// (confine): a name with ".." or an absolute path that leads out of it is
// refused with an error that names the file. Run with the job user's
// rights.
func outputs(dir string, job *classad.Ad, req *wire.ActivateRequest, inputs map[string]staged) ([]output, error) {
	var outs []output
	hdr := func(name, stream string) wire.TransferHeader {
		return wire.TransferHeader{ClaimID: req.ClaimID, JobID: req.JobID, Name: name, Stream: stream}
	}
	for _, std := range []struct{ attr, stream, file string }{{"Out", wire.StreamStdout, "_condor_stdout"}, {"Err", wire.StreamStderr, "_condor_stderr"}} {
		if p, _ := job.EvalAttr(std.attr).StringValue(); p != "" && p != "/dev/null" {
			outs = append(outs, output{hdr: hdr("", std.stream), rel: std.file})
		}
	}
	if list, ok := job.EvalAttr("TransferOutput").StringValue(); ok {
		for _, name := range config.SplitFileList(list) {
			rel, err := confine.Local(dir, name)
			if err != nil {
				return nil, fmt.Errorf("transfer of output file %s failed: %w", name, err)
			}
			outs = append(outs, output{hdr: hdr(filepath.Base(name), ""), rel: rel})
		}
		return outs, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing scratch directory: %w", err)
	}
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || n == ExecutableName || n == "_condor_stdout" || n == "_condor_stderr" || n == JobAdFile || n == MachineAdFile || strings.HasPrefix(n, partialPrefix) {
			continue
		}
		if in, ok := inputs[n]; ok {
			if fi, err := e.Info(); err == nil && fi.Size() == in.info.Size && fi.ModTime().Equal(in.mtime) {
				continue // the input file, unchanged
			}
		}
		outs = append(outs, output{hdr: hdr(n, ""), rel: n, scanned: true})
	}
	return outs, nil
}

// errClaimLost is the error of a transfer the schedd refused because it
// no longer holds the job's claim.
var errClaimLost = errors.New("the schedd no longer holds the job's claim")

// sendOutputs sends the job's outputs (see outputs) to the claim's
// schedd, each opened with the job user's rights, and lists what was
// sent in report.Outputs. A file that cannot be read, or changes while
// it is read, again and again, gives an error that names it; a schedd
// that cannot be reached is retried for REPORT_RETRY_TIME; a schedd that
// no longer holds the claim gives errClaimLost.
func (s *Startd) sendOutputs(ctx context.Context, sl *slot, r *run, dir string, job *classad.Ad, req *wire.ActivateRequest, inputs map[string]staged, report *wire.JobReport) error {
	return s.sendFiles(ctx, sl, r, dir, req, func() ([]output, error) { return outputs(dir, job, req, inputs) }, report)
}

// sendFiles sends the files list finds in the scratch directory dir (run
// with the job user's rights) as sendOutputs sends a job's outputs.
func (s *Startd) sendFiles(ctx context.Context, sl *slot, r *run, dir string, req *wire.ActivateRequest, list func() ([]output, error), report *wire.JobReport) error {
	acct := r.user.account()
	var root *os.Root
	var outs []output
	err := asuser.Do(acct, func() error {
		var err error
		if root, err = os.OpenRoot(dir); err != nil {
			return fmt.Errorf("opening scratch directory: %w", err)
		}
		outs, err = list()
		return err
	})
	if root != nil {
		defer root.Close()
	}
	if err != nil {
		return err
	}
	limit, _ := s.opts.Config.Duration("REPORT_RETRY_TIME", 10*time.Minute)
	deadline := time.Now().Add(limit)
	for _, o := range outs {
		open := func() (*os.File, error) {
			var f *os.File
			err := asuser.Do(acct, func() error {
				var err error
				f, err = o.open(root)
				return err
			})
			return f, err
		}
		backoff := 100 * time.Millisecond
		for {
			s.mu.Lock()
			schedd := sl.schedd
			s.mu.Unlock()
			info, err := xfer.Send(ctx, s.peer(schedd).Schedd().SendOutput, o.hdr, open, xfer.Options{})
			if err == nil {
				report.Outputs = append(report.Outputs, info)
				break
			}
			var oe *xfer.OpenError
			var ce *xfer.ChangedError
			var we *wire.Error
			switch {
			case errors.As(err, &oe) && o.scanned && errors.Is(err, os.ErrNotExist):
				// Removed since it was listed.
			case errors.As(err, &oe):
				return oe.Err
			case errors.As(err, &ce):
				return fmt.Errorf("transfer of output file %s failed: %w", o.hdr.Key(), ce)
			case errors.As(err, &we) && we.Status == http.StatusUnprocessableEntity:
				// The schedd cannot store it where it goes; its final
				// report holds the job with the reason.
				s.log.Warn("the schedd cannot store an output file", "job", req.JobID, "file", o.hdr.Key(), "err", err)
			case errors.As(err, &we) && (we.Status == http.StatusNotFound || we.Status == http.StatusConflict):
				return fmt.Errorf("%w: %w", errClaimLost, err)
			case ctx.Err() != nil:
				return fmt.Errorf("%w: %w", errClaimLost, ctx.Err())
			case time.Now().After(deadline):
				return fmt.Errorf("transfer of output file %s failed: %w", o.hdr.Key(), err)
			}
			if errors.As(err, &we) && we.Status == http.StatusUnprocessableEntity || errors.As(err, &oe) {
				break
			}
			s.log.Warn("sending output file; retrying", "job", req.JobID, "file", o.hdr.Key(), "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
		}
	}
	return nil
}

// keepAlive renews the claim of a job that ended with its schedd every
// ALIVE_INTERVAL until the function it returns is called, once the
// schedd acknowledged the job's final report: a long output transfer
// must not make the schedd think the claim lost. A schedd that answers it
// no longer holds the claim cancels lost.
func (s *Startd) keepAlive(sl *slot, req *wire.ActivateRequest, lost context.CancelFunc) (stop func()) {
	done := make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.alive)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-s.stop.Done():
				return
			case <-t.C:
			}
			s.mu.Lock()
			schedd := sl.schedd
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(s.stop, s.claimLease)
			err := s.peer(schedd).Schedd().JobReport(ctx, &wire.JobReport{ClaimID: req.ClaimID, JobID: req.JobID,
				Kind: wire.ReportUpdate, Startd: s.Address(), SlotName: sl.name})
			cancel()
			var we *wire.Error
			select {
			case <-done:
				return // the final report was acknowledged meanwhile
			default:
			}
			if errors.As(err, &we) && we.Status == http.StatusNotFound {
				s.log.Warn("the schedd no longer holds the claim of a job that ended", "slot", sl.name, "job", req.JobID)
				lost()
				return
			}
		}
	}()
	return func() { close(done) }
}
