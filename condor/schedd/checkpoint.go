package schedd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/xfer"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// DefaultMaxCheckpointMB is SCHEDD_MAX_CHECKPOINT_MB's default: the most
// one checkpoint of a job may weigh in the spool, its files together.
const DefaultMaxCheckpointMB = 1024

// ckptSpool keeps the checkpoints of self-checkpointing jobs in
// SPOOL/checkpoints, a directory a job: each checkpoint is received in a
// directory of its own ("N.partial-CLAIM"), and becomes the job's
// checkpoint only once every file of it arrived whole and reached the
// disk, by renaming that directory to its number N. A crash or a transfer
// cut short at any point leaves the previous checkpoint whole: the job's
// checkpoint is always its highest-numbered directory. Once a checkpoint
// is in place the older ones are removed: a job keeps its latest
// checkpoint and the one being written, no more.
type ckptSpool struct {
	dir string
	max int64 // bytes one checkpoint may weigh

	mu        sync.Mutex
	writing   map[ckptKey]*ckptWrite
	lastSweep time.Time
}

// ckptKey names a checkpoint being received.
type ckptKey struct {
	claim string
	job   jobqueue.JobID
	n     int64
}

// ckptWrite is a checkpoint being received.
type ckptWrite struct {
	dir   string
	bytes map[string]int64 // bytes received, by file
	files map[string]wire.FileInfo
	err   error // why the checkpoint cannot be kept
}

func (w *ckptWrite) total() int64 {
	var t int64
	for _, b := range w.bytes {
		t += b
	}
	return t
}

func newCkptSpool(spool string, cfg *config.Config) (*ckptSpool, error) {
	mb, err := cfg.Int("SCHEDD_MAX_CHECKPOINT_MB", DefaultMaxCheckpointMB)
	if err == nil && mb < 1 {
		err = fmt.Errorf("%d is not a positive size", mb)
	}
	if err != nil {
		return nil, fmt.Errorf("SCHEDD_MAX_CHECKPOINT_MB: %w", err)
	}
	return &ckptSpool{dir: filepath.Join(spool, "checkpoints"), max: int64(mb) << 20, writing: map[ckptKey]*ckptWrite{}}, nil
}

// jobDir is where job id's checkpoints are.
func (sp *ckptSpool) jobDir(id jobqueue.JobID) string {
	return filepath.Join(sp.dir, fmt.Sprintf("%d.%d", id.Cluster, id.Proc))
}

// ckptFileName is the name a checkpoint's file has in the spool and in
// the job's scratch directory: the standard streams as the starter names
// them, any other file by its plain name.
func ckptFileName(hdr wire.TransferHeader) (string, error) {
	switch hdr.Stream {
	case wire.StreamStdout:
		return "_condor_stdout", nil
	case wire.StreamStderr:
		return "_condor_stderr", nil
	case "":
	default:
		return "", fmt.Errorf("%w: unknown stream %q", wire.ErrBadRequest, hdr.Stream)
	}
	n := hdr.Name
	if n == "" || n != filepath.Base(n) || n == "." || n == ".." || strings.HasPrefix(n, ".pond-") {
		return "", fmt.Errorf("%w: checkpoint file name %q is not a plain file name", wire.ErrBadRequest, n)
	}
	return n, nil
}

// begin returns the checkpoint being received under key, making its
// directory on its first file.
func (sp *ckptSpool) begin(key ckptKey) (*ckptWrite, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if w := sp.writing[key]; w != nil {
		return w, nil
	}
	if latest, _, _ := sp.latest(key.job); key.n <= latest {
		return nil, fmt.Errorf("%w: checkpoint %d of job %s is not newer than its checkpoint %d", wire.ErrConflict, key.n, key.job, latest)
	}
	jd := sp.jobDir(key.job)
	if err := os.MkdirAll(jd, 0o700); err != nil {
		return nil, fmt.Errorf("making the job's checkpoint directory: %w", err)
	}
	d := filepath.Join(jd, fmt.Sprintf("%d.partial-%s", key.n, key.claim[:min(len(key.claim), 8)]))
	_ = os.RemoveAll(d) // what a restarted schedd left of it
	if err := os.Mkdir(d, 0o700); err != nil {
		return nil, fmt.Errorf("making the checkpoint's directory: %w", err)
	}
	w := &ckptWrite{dir: d, bytes: map[string]int64{}, files: map[string]wire.FileInfo{}}
	sp.writing[key] = w
	return w, nil
}

// fail records why the checkpoint under key cannot be kept.
func (sp *ckptSpool) fail(w *ckptWrite, err error) {
	sp.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	sp.mu.Unlock()
}

// receive writes one file of the checkpoint w from tr, named name, giving
// up (and failing the checkpoint) once the checkpoint would weigh more
// than the spool allows; abort cuts the stream.
func (sp *ckptSpool) receive(w *ckptWrite, name string, tr *wire.TransferReader, abort func(), progress func()) (wire.FileInfo, error) {
	sp.mu.Lock()
	err := w.err
	sp.mu.Unlock()
	if err != nil {
		return wire.FileInfo{}, &storeError{err}
	}
	f, err := os.CreateTemp(w.dir, ".pond-"+name+"-*")
	if err != nil {
		return wire.FileInfo{}, fmt.Errorf("writing checkpoint file %s: %w", name, err)
	}
	tmp := f.Name()
	var over error
	info, err := xfer.Receive(tr, f, func(n int64) {
		sp.mu.Lock()
		w.bytes[name] = n
		total := w.total()
		sp.mu.Unlock()
		if total > sp.max && over == nil {
			over = fmt.Errorf("the checkpoint weighs more than SCHEDD_MAX_CHECKPOINT_MB (%d MiB)", sp.max>>20)
			abort()
		}
		progress()
	})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if over != nil {
		err = over
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(w.dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		sp.mu.Lock()
		delete(w.bytes, name)
		sp.mu.Unlock()
		if over != nil {
			sp.fail(w, over)
			return wire.FileInfo{}, &storeError{over}
		}
		return wire.FileInfo{}, fmt.Errorf("receiving checkpoint file %s: %w", name, err)
	}
	sp.mu.Lock()
	w.files[name] = info
	sp.mu.Unlock()
	return info, nil
}

// commit makes the checkpoint under key the job's, once it holds every
// file want lists whole; the job's older checkpoints are removed then.
// A checkpoint missing a file, or one that failed, is dropped with an
// error that says why, and the job's previous checkpoint stays.
func (sp *ckptSpool) commit(key ckptKey, want []wire.FileInfo) error {
	sp.mu.Lock()
	w := sp.writing[key]
	delete(sp.writing, key)
	sp.mu.Unlock()
	if w == nil {
		if len(want) == 0 {
			// A checkpoint of no file: an empty one.
			var err error
			if w, err = sp.begin(key); err != nil {
				return err
			}
			sp.mu.Lock()
			delete(sp.writing, key)
			sp.mu.Unlock()
		} else {
			return fmt.Errorf("%w: checkpoint %d: none of its files arrived", wire.ErrResend, key.n)
		}
	}
	drop := func(err error) error {
		_ = os.RemoveAll(w.dir)
		return err
	}
	if w.err != nil {
		return drop(fmt.Errorf("%w: checkpoint %d: %w", wire.ErrBadRequest, key.n, w.err))
	}
	for _, f := range want {
		name, err := ckptFileName(wire.TransferHeader{Name: f.Name, Stream: f.Stream})
		if err != nil {
			return drop(err)
		}
		got, ok := w.files[name]
		switch {
		case !ok:
			return drop(fmt.Errorf("%w: checkpoint file %s", wire.ErrResend, f.Key()))
		case got.Size != f.Size || got.SHA256 != f.SHA256:
			return drop(fmt.Errorf("%w: checkpoint file %s arrived as %d bytes with SHA-256 %s, the starter sent %d bytes with %s",
				wire.ErrResend, f.Key(), got.Size, got.SHA256, f.Size, f.SHA256))
		}
		delete(w.files, name)
	}
	for name := range w.files {
		// Sent, but not part of the checkpoint the starter reports.
		_ = os.Remove(filepath.Join(w.dir, name))
	}
	if err := syncDir(w.dir); err != nil {
		return drop(fmt.Errorf("writing checkpoint %d: %w", key.n, err))
	}
	if err := sp.install(key.job, w.dir, key.n); err != nil {
		return drop(err)
	}
	return nil
}

// install switches job id's checkpoint to the complete directory dir as
// checkpoint n, then removes the older ones: the rename is the switch,
// so a crash before it keeps the previous checkpoint, and one after it
// the new one.
func (sp *ckptSpool) install(id jobqueue.JobID, dir string, n int64) error {
	jd := sp.jobDir(id)
	final := filepath.Join(jd, strconv.FormatInt(n, 10))
	if err := os.Rename(dir, final); err != nil {
		return fmt.Errorf("putting checkpoint %d in place: %w", n, err)
	}
	if err := syncDir(jd); err != nil {
		return fmt.Errorf("putting checkpoint %d in place: %w", n, err)
	}
	sp.prune(id, n)
	return nil
}

// prune removes job id's checkpoints older than keep, and the partial
// ones nothing is writing.
func (sp *ckptSpool) prune(id jobqueue.JobID, keep int64) {
	jd := sp.jobDir(id)
	ents, _ := os.ReadDir(jd)
	sp.mu.Lock()
	busy := map[string]bool{}
	for k, w := range sp.writing {
		if k.job == id {
			busy[filepath.Base(w.dir)] = true
		}
	}
	sp.mu.Unlock()
	for _, e := range ents {
		n, partial := ckptNumber(e.Name())
		if n < 0 || busy[e.Name()] || !partial && n >= keep {
			continue
		}
		_ = os.RemoveAll(filepath.Join(jd, e.Name()))
	}
}

// ckptNumber parses a checkpoint directory's name: its number, and
// whether it is still being written; -1 for another name.
func ckptNumber(name string) (int64, bool) {
	num, rest, partial := strings.Cut(name, ".partial-")
	if partial && rest == "" {
		return -1, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != num {
		return -1, false
	}
	return n, partial
}

// latest returns job id's checkpoint: its number (0: none), directory
// and files, sorted by name.
func (sp *ckptSpool) latest(id jobqueue.JobID) (int64, string, []string) {
	jd := sp.jobDir(id)
	ents, err := os.ReadDir(jd)
	if err != nil {
		return 0, "", nil
	}
	var best int64
	for _, e := range ents {
		if n, partial := ckptNumber(e.Name()); !partial && e.IsDir() && n > best {
			best = n
		}
	}
	if best == 0 {
		return 0, "", nil
	}
	dir := filepath.Join(jd, strconv.FormatInt(best, 10))
	files, _ := os.ReadDir(dir)
	var names []string
	for _, f := range files {
		if f.Type().IsRegular() && !strings.HasPrefix(f.Name(), ".pond-") {
			names = append(names, f.Name())
		}
	}
	sort.Strings(names)
	return best, dir, names
}

// forget drops whatever is being received under claim for job id.
func (sp *ckptSpool) forget(claim string, id jobqueue.JobID) {
	sp.mu.Lock()
	var drop []string
	for k, w := range sp.writing {
		if k.claim == claim && k.job == id {
			drop = append(drop, w.dir)
			delete(sp.writing, k)
		}
	}
	sp.mu.Unlock()
	for _, d := range drop {
		_ = os.RemoveAll(d)
	}
}

// remove removes every checkpoint of job id.
func (sp *ckptSpool) remove(id jobqueue.JobID) {
	_ = os.RemoveAll(sp.jobDir(id))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ckptSweepEvery is how often the schedd looks for the checkpoints of
// jobs no longer in its queue.
const ckptSweepEvery = 30 * time.Second

// sweepCheckpoints removes the checkpoints of jobs that left the queue
// (completed, removed, or gone from it) and those received under claims
// the schedd no longer holds; a job's checkpoint is also removed as soon
// as the job completes.
func (s *Schedd) sweepCheckpoints(ctx context.Context) {
	sp := s.ckpt
	sp.mu.Lock()
	due := time.Since(sp.lastSweep) >= ckptSweepEvery
	if due {
		sp.lastSweep = time.Now()
	}
	var stale []ckptKey
	s.mu.Lock()
	for k := range sp.writing {
		if c := s.claims[k.claim]; c == nil || c.job != k.job {
			stale = append(stale, k)
		}
	}
	s.mu.Unlock()
	sp.mu.Unlock()
	for _, k := range stale {
		sp.forget(k.claim, k.job)
	}
	if !due {
		return
	}
	ents, err := os.ReadDir(sp.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		id, err := parseJobID(e.Name())
		if err != nil {
			continue
		}
		j, err := s.q.Get(ctx, id)
		if errors.Is(err, jobqueue.ErrNotFound) || err == nil && (j.Status == jobqueue.Completed || j.Status == jobqueue.Removed) {
			s.log.Debug("removing the checkpoint of a job no longer in the queue", "job", id)
			sp.remove(id)
		}
	}
}

// receiveCheckpoint takes one file of a job's checkpoint from the starter
// of the claim that runs the job, into the spool (see ckptSpool).
func (s *Schedd) receiveCheckpoint(r *http.Request, tr *wire.TransferReader, hdr wire.TransferHeader, id jobqueue.JobID) (*wire.FileInfo, error) {
	name, err := ckptFileName(hdr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	c := s.claims[hdr.ClaimID]
	if c == nil || c.job != id || s.active[id] != c {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: no claim %s for job %s (a stale copy of the job's checkpoint?)", wire.ErrNotFound, hdr.ClaimID, hdr.JobID)
	}
	c.receiving++
	c.contact = s.now()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		c.receiving--
		if !c.contact.IsZero() {
			c.contact = s.now()
		}
		s.mu.Unlock()
	}()
	select {
	case s.downloads <- struct{}{}:
		defer func() { <-s.downloads }()
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	w, err := s.ckpt.begin(ckptKey{claim: hdr.ClaimID, job: id, n: hdr.Checkpoint})
	if err != nil {
		return nil, err
	}
	var last time.Time
	info, err := s.ckpt.receive(w, name, tr, func() { _ = r.Body.Close() }, func() {
		if time.Since(last) > time.Second {
			last = time.Now()
			s.mu.Lock()
			if !c.contact.IsZero() {
				c.contact = s.now()
			}
			s.mu.Unlock()
		}
	})
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// checkpointReport applies a starter's report of a checkpoint: the
// checkpoint becomes the job's in the spool, the next start of the job
// sends it, and the job's NumCkpts, LastCkptTime, CommittedTime and
// CommittedSlotTime say so. The job log gets the output transfer's start
// and end, as HTCondor's does for a checkpoint. A checkpoint the spool
// cannot keep (too big, a file that did not arrive whole) is refused
// with the reason (HTTP 400), for the starter to hold the job with; the
// job's previous checkpoint stays.
func (s *Schedd) checkpointReport(ctx context.Context, c *claim, id jobqueue.JobID, r *wire.JobReport) error {
	ad, err := s.runningAd(ctx, c, id)
	if err != nil {
		return err
	}
	if ad == nil {
		s.ckpt.forget(r.ClaimID, id)
		return fmt.Errorf("%w: job %s no longer runs", wire.ErrNotFound, r.JobID)
	}
	s.writeEvent(ctx, id, ad, joblog.Event{Type: joblog.FileTransfer, TransferKind: joblog.TransferOutputStarted})
	if err := s.ckpt.commit(ckptKey{claim: r.ClaimID, job: id, n: r.Checkpoint}, r.Outputs); err != nil {
		s.log.Warn("the job's checkpoint was not kept", "job", id, "checkpoint", r.Checkpoint, "err", err)
		return err
	}
	s.writeEvent(ctx, id, ad, joblog.Event{Type: joblog.FileTransfer, TransferKind: joblog.TransferOutputFinished})
	attrs := jobqueue.Ad{"NumCkpts": strconv.FormatInt(r.Checkpoint, 10), "LastCkptTime": strconv.FormatInt(s.now().Unix(), 10)}
	s.commitTime(c, ad, r.WallClock, attrs)
	if err := s.q.SetAttrs(ctx, id, attrs); err != nil && !gone(err) {
		return fmt.Errorf("recording checkpoint %d of job %s: %w", r.Checkpoint, id, err)
	}
	s.mu.Lock()
	if c.ad != nil {
		c.ad = c.ad.Copy()
		for k, v := range attrs {
			_ = c.ad.SetExpr(k, v)
		}
	}
	s.mu.Unlock()
	s.log.Info("kept the job's checkpoint", "job", id, "checkpoint", r.Checkpoint, "files", len(r.Outputs))
	return nil
}

// commitTime adds to attrs the job's CommittedTime and CommittedSlotTime
// grown by the part of its run (wall seconds since it started on its
// claim) not yet committed: the run up to a checkpoint, or to its end.
func (s *Schedd) commitTime(c *claim, ad *classad.Ad, wall float64, attrs jobqueue.Ad) {
	s.mu.Lock()
	delta := max(wall-c.committedWall, 0)
	c.committedWall = max(wall, c.committedWall)
	weight := 1.0
	if c.slot != nil {
		if w := c.slot.EvalNumber("SlotWeight", nil, 0); w > 0 {
			weight = w
		} else if w := c.slot.EvalNumber("Cpus", nil, 0); w > 0 {
			weight = w
		}
	}
	s.mu.Unlock()
	prev := ad.EvalNumber("CommittedTime", nil, 0)
	prevSlot := ad.EvalNumber("CommittedSlotTime", nil, 0)
	attrs["CommittedTime"] = strconv.FormatInt(int64(prev+delta+0.5), 10)
	attrs["CommittedSlotTime"] = strconv.FormatFloat(prevSlot+delta*weight, 'f', 3, 64)
}

// ckptInputs adds job id's checkpoint in the spool to the files in sends
// its next start, in place of inputs of the same names: the job resumes
// from it in its new scratch directory.
func (s *Schedd) ckptInputs(id jobqueue.JobID, in *inputSet) {
	n, dir, names := s.ckpt.latest(id)
	if n == 0 {
		return
	}
	have := map[string]bool{}
	for _, name := range names {
		have[name] = true
	}
	kept := in.files[:0]
	for _, f := range in.files {
		if !have[f.name] {
			kept = append(kept, f)
		}
	}
	in.files = kept
	for _, name := range names {
		p := filepath.Join(dir, name)
		in.files = append(in.files, inputSource{name: name, what: fmt.Sprintf("checkpoint %d file %s", n, name),
			open: func() (*os.File, error) { return os.Open(p) }})
	}
}

// commitOnEnd adds to attrs the CommittedTime of the run a final report
// ends: all of a run that exited, and of one evicted when the job says it
// resumes where it stopped (IsResumable); an evicted run's time since its
// last checkpoint is lost otherwise, and not committed.
func (s *Schedd) commitOnEnd(r *wire.JobReport, ad *classad.Ad, attrs jobqueue.Ad) {
	resumable, _ := ad.EvalAttr("IsResumable").BoolValue()
	if r.Kind != wire.ReportExited && !(r.Kind == wire.ReportEvicted && resumable) {
		return
	}
	s.mu.Lock()
	c := s.claims[r.ClaimID]
	s.mu.Unlock()
	if c == nil {
		return
	}
	s.commitTime(c, ad, r.WallClock, attrs)
}
