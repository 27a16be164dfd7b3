package schedd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/internal/confine"
	"github.com/pond-htc/pond/condor/internal/xfer"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// stagedOut is an output file (or stdout or stderr) of a job received
// whole under a claim, kept under a temporary name next to where it goes
// until the job's final report puts it in place.
type stagedOut struct {
	what  string   // "Out", "Err", "output file NAME": for messages
	root  *os.Root // the directory it goes to; nil: it goes nowhere (/dev/null)
	tmp   string   // its temporary name in root
	final string   // its name in root
	acct  *asuser.Account
	as    *asuser.Threads // acts as acct
	info  wire.FileInfo
}

// discard removes a staged file that will not be put in place.
func (o *stagedOut) discard() {
	if o.root == nil {
		return
	}
	_ = o.as.Do(o.acct, func() error { return o.root.Remove(o.tmp) })
	o.root.Close()
}

// commit puts a staged file in place.
func (o *stagedOut) commit() error {
	if o.root == nil {
		return nil
	}
	defer o.root.Close()
	err := o.as.Do(o.acct, func() error { return o.root.Rename(o.tmp, o.final) })
	if err != nil {
		_ = o.as.Do(o.acct, func() error { return o.root.Remove(o.tmp) })
		return fmt.Errorf("writing %s%s: %w", o.what, as(o.acct), err)
	}
	return nil
}

// stageKey names the outputs of a job received under one claim.
type stageKey struct {
	claim string
	job   jobqueue.JobID
}

// outputPath is where the output hdr announces goes for the job ad: the
// job's Out or Err for its streams, else the file's name as
// TransferOutputRemaps remaps it. what names it in messages.
func outputPath(ad *classad.Ad, hdr wire.TransferHeader) (what, path string, err error) {
	switch hdr.Stream {
	case wire.StreamStdout:
		p, _ := ad.EvalAttr("Out").StringValue()
		return "Out", p, nil
	case wire.StreamStderr:
		p, _ := ad.EvalAttr("Err").StringValue()
		return "Err", p, nil
	case "":
	default:
		return "", "", fmt.Errorf("%w: unknown stream %q", wire.ErrBadRequest, hdr.Stream)
	}
	name := hdr.Name
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return "", "", fmt.Errorf("%w: output file name %q is not a plain file name", wire.ErrBadRequest, name)
	}
	if m, ok := ad.EvalAttr("TransferOutputRemaps").StringValue(); ok {
		for _, pair := range strings.Split(m, ";") {
			if k, v, ok := strings.Cut(pair, "="); ok && strings.TrimSpace(k) == name {
				return "output file " + name, strings.TrimSpace(v), nil
			}
		}
	}
	return "output file " + name, name, nil
}

// stageOutput opens, with the rights of acct (the job's owner, see
// jobAccount) or the schedd's own when acct is nil, a temporary file next
// to where the output hdr announces goes (see outputPath). A relative
// path stays inside the job's Iwd: a name with "..", or a symbolic link
// on the way that leads out of it, is refused. An absolute path is taken
// as it is, but a symbolic link as its last component is refused.
// Directories and special files are never replaced. The file returned is
// nil for an output that goes nowhere (/dev/null, or no Out).
func stageOutput(ad *classad.Ad, hdr wire.TransferHeader, acct *asuser.Account, threads *asuser.Threads, claimID string) (*stagedOut, *os.File, error) {
	what, p, err := outputPath(ad, hdr)
	if err != nil {
		return nil, nil, err
	}
	o := &stagedOut{what: what, acct: acct, as: threads}
	if p == "" || p == "/dev/null" {
		return o, nil, nil
	}
	var f *os.File
	err = threads.Do(acct, func() error {
		root, base, err := outputDir(ad, p, acct != nil)
		if err != nil {
			return err
		}
		o.root = root
		o.final = base
		prefix := "." + base + ".pond-" + claimID[:min(len(claimID), 8)] + "-"
		removeStale(o.root, prefix)
		suffix := make([]byte, 6)
		_, _ = rand.Read(suffix)
		o.tmp = prefix + hex.EncodeToString(suffix) + ".partial"
		f, err = o.root.OpenFile(o.tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			o.root.Close()
			o.root = nil
			// Name the file the job names, not the temporary one.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				op, name := "openat", p
				if filepath.IsAbs(p) {
					op = "open"
				}
				err = &fs.PathError{Op: op, Path: name, Err: pe.Err}
			}
		}
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("writing %s%s: %w", what, as(acct), err)
	}
	return o, f, nil
}

// outputDir opens the directory an output file of the job goes to,
// path p (see outputPath), and returns it with the file's name in it: a
// relative path stays inside the job's Iwd (a name with "..", or a
// symbolic link on the way that leads out of it, is refused); an absolute
// path is taken as it is, but a symbolic link as its last component is
// refused. Call it with the rights the file is written with; needIwd
// refuses a relative path of a job without an Iwd.
func outputDir(ad *classad.Ad, p string, needIwd bool) (*os.Root, string, error) {
	dir, base := filepath.Dir(p), filepath.Base(p)
	if filepath.IsAbs(p) {
		if err := confine.CheckPathNoFollow(p); err != nil {
			return nil, "", err
		}
		root, err := os.OpenRoot(dir)
		return root, base, err
	}
	iwd, _ := ad.EvalAttr("Iwd").StringValue()
	rel, err := confine.Local(iwd, p)
	if err != nil {
		return nil, "", err
	}
	if iwd == "" && needIwd {
		return nil, "", errors.New("the job has no Iwd (initial directory) to write its files in")
	}
	top, err := os.OpenRoot(firstNonEmpty(iwd, "."))
	if err != nil {
		return nil, "", fmt.Errorf("opening the job's initial directory: %w", err)
	}
	if err := confine.Check(top, rel); err != nil {
		top.Close()
		return nil, "", err
	}
	dir, base = filepath.Dir(rel), filepath.Base(rel)
	if dir == "." {
		return top, base, nil
	}
	root, err := top.OpenRoot(dir)
	top.Close()
	return root, base, err
}

// removeStale removes from root the temporary files of an output whose
// names start with prefix: those of the same claim that a schedd
// restarted since never put in place (the starter sends them again).
func removeStale(root *os.Root, prefix string) {
	d, err := root.Open(".")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && strings.HasSuffix(n, ".partial") {
			_ = root.Remove(n)
		}
	}
}

// ReceiveOutput takes one of a job's outputs from the starter (a transfer
// stream, see wire.TransferReader) and keeps it, under a temporary name
// next to where it goes, until the job's final report puts it in place.
// Only the claim that currently runs the job may send it: a copy from an
// earlier attempt, whose claim the schedd gave up, is refused, and so is
// one whose claim is given up while it arrives. While an output arrives,
// its claim's lease holds.
func (s *Schedd) ReceiveOutput(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		wire.WriteError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s needs POST", r.URL.Path))
		return
	}
	info, err := s.receiveOutput(w, r)
	if err != nil {
		status := wire.ErrorStatus(err)
		var se *storeError
		switch {
		case errors.Is(err, wire.ErrChecksum) || errors.Is(err, wire.ErrAborted):
			status = http.StatusBadRequest
		case errors.As(err, &se):
			status = http.StatusUnprocessableEntity
		}
		wire.WriteError(w, status, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, info)
}

func (s *Schedd) receiveOutput(w http.ResponseWriter, r *http.Request) (*wire.FileInfo, error) {
	rc := http.NewResponseController(w)
	tr, err := wire.NewTransferReader(r.Body, func() error { return rc.SetReadDeadline(time.Now().Add(xfer.DefaultStall)) })
	if err != nil {
		return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	hdr := tr.Header()
	id, err := parseJobID(hdr.JobID)
	if err != nil {
		return nil, err
	}
	if hdr.Checkpoint != 0 {
		return s.receiveCheckpoint(r, tr, hdr, id)
	}
	s.mu.Lock()
	c := s.claims[hdr.ClaimID]
	if c == nil || c.job != id || s.active[id] != c {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: no claim %s for job %s (a stale copy of the job's output?)", wire.ErrNotFound, hdr.ClaimID, hdr.JobID)
	}
	c.receiving++
	c.contact = s.now()
	first := !c.outputStarted
	c.outputStarted = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		c.receiving--
		if !c.contact.IsZero() {
			c.contact = s.now()
		}
		s.mu.Unlock()
	}()
	ad, err := s.runningAd(r.Context(), c, id)
	if err != nil {
		return nil, err
	}
	if ad == nil {
		return nil, fmt.Errorf("%w: job %s no longer runs", wire.ErrNotFound, hdr.JobID)
	}
	s.startdTold(r.Context(), c, id)
	if first {
		s.writeEvent(r.Context(), id, ad, joblog.Event{Type: joblog.FileTransfer, TransferKind: joblog.TransferOutputStarted})
	}
	select {
	case s.downloads <- struct{}{}:
		defer func() { <-s.downloads }()
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	acct, err := s.jobAccount(ad)
	if err != nil {
		return nil, err
	}
	o, f, err := stageOutput(ad, hdr, acct, s.asUser, hdr.ClaimID)
	if err != nil {
		// The job's output cannot go where it should: the final report
		// holds the job with this reason.
		s.mu.Lock()
		c.outputErr = firstNonEmpty(c.outputErr, err.Error())
		s.mu.Unlock()
		return nil, &storeError{err}
	}
	var last atomic.Int64
	progress := func(int64) {
		// Each second of progress renews the claim's lease.
		if now := time.Now().UnixNano(); now-last.Load() > int64(time.Second) {
			last.Store(now)
			s.mu.Lock()
			if !c.contact.IsZero() {
				c.contact = s.now()
			}
			s.mu.Unlock()
		}
	}
	var info wire.FileInfo
	if f == nil {
		info, err = receiveDiscard(tr)
	} else {
		info, err = xfer.Receive(tr, f, progress)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		o.discard()
		return nil, fmt.Errorf("receiving %s: %w", o.what, err)
	}
	o.info = info
	key := stageKey{hdr.ClaimID, id}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claims[hdr.ClaimID] != c || c.job != id || s.active[id] != c {
		o.discard()
		return nil, fmt.Errorf("%w: the claim of job %s was given up while %s arrived", wire.ErrNotFound, hdr.JobID, o.what)
	}
	if s.staged[key] == nil {
		s.staged[key] = map[string]*stagedOut{}
	}
	if old := s.staged[key][hdr.Key()]; old != nil {
		old.discard()
	}
	s.staged[key][hdr.Key()] = o
	return &info, nil
}

// storeError is the error of an output that cannot be stored where it
// goes: the starter goes on with the others, and the final report holds
// the job with this reason (HTTP 422).
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// receiveDiscard reads a transfer whose file goes nowhere.
func receiveDiscard(tr *wire.TransferReader) (wire.FileInfo, error) {
	if _, err := io.Copy(io.Discard, tr); err != nil {
		return wire.FileInfo{}, err
	}
	return tr.Info(), nil
}

// takeStaged returns the outputs received under a claim for a job, and
// forgets them.
func (s *Schedd) takeStaged(claimID string, id jobqueue.JobID) map[string]*stagedOut {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := stageKey{claimID, id}
	staged := s.staged[key]
	delete(s.staged, key)
	return staged
}

// commitOutputs puts in place the outputs a job's final report lists,
// each received whole under the report's claim with the size and
// checksum the report gives; what else was received under the claim is
// discarded. An output missing or not matching gives an error that
// names it, and nothing of the job's output is put in place then.
func (s *Schedd) commitOutputs(r *wire.JobReport, id jobqueue.JobID) error {
	staged := s.takeStaged(r.ClaimID, id)
	defer func() {
		for _, o := range staged {
			o.discard()
		}
	}()
	s.mu.Lock()
	var outputErr string
	if c := s.claims[r.ClaimID]; c != nil {
		outputErr = c.outputErr
	}
	s.mu.Unlock()
	if outputErr != "" {
		return errors.New(outputErr)
	}
	var commit []*stagedOut
	for _, want := range r.Outputs {
		o := staged[want.Key()]
		if o == nil {
			return fmt.Errorf("%w: output %s", wire.ErrResend, want.Key())
		}
		if o.info.Size != want.Size || o.info.SHA256 != want.SHA256 {
			return fmt.Errorf("output %s arrived as %d bytes with SHA-256 %s, the starter sent %d bytes with %s",
				want.Key(), o.info.Size, o.info.SHA256, want.Size, want.SHA256)
		}
		commit = append(commit, o)
		delete(staged, want.Key())
	}
	var errs []error
	for _, o := range commit {
		errs = append(errs, o.commit())
	}
	return errors.Join(errs...)
}

// sweepStaged discards the outputs received under claims the schedd no
// longer holds for their job (given up while the outputs arrived).
func (s *Schedd) sweepStaged() {
	var drop []*stagedOut
	s.mu.Lock()
	for key, files := range s.staged {
		if c := s.claims[key.claim]; c == nil || c.job != key.job {
			for _, o := range files {
				drop = append(drop, o)
			}
			delete(s.staged, key)
		}
	}
	s.mu.Unlock()
	for _, o := range drop {
		o.discard()
	}
}

// inputSource is an input file a job transfers in.
type inputSource struct {
	name string // its name in the job's scratch directory
	what string // how messages name it
	open func() (*os.File, error)
}

// inputSet is the input files of a job, open to be sent.
type inputSet struct {
	files []inputSource
	root  *os.Root // the job's Iwd, when a name is relative to it
}

// Close releases the set's directory.
func (in *inputSet) Close() {
	if in != nil && in.root != nil {
		in.root.Close()
	}
}

// sendInputs sends a job's input files to the startd of claim c, each in
// a stream of its own, and returns what the startd holds. The job log
// says when the transfer started and finished. A file that cannot be
// read, or that changes while it is read again and again, gives a hold
// reason (hold is true); a startd that cannot be reached or refuses, an
// error to requeue the job with.
func (s *Schedd) sendInputs(ctx context.Context, c *claim, id jobqueue.JobID, ad *classad.Ad, in *inputSet) (files []wire.FileInfo, hold bool, err error) {
	started := joblog.Event{Type: joblog.FileTransfer, TransferKind: joblog.TransferInputStarted, Host: "<" + c.addr() + ">"}
	finished := joblog.Event{Type: joblog.FileTransfer, TransferKind: joblog.TransferInputFinished}
	if len(in.files) == 0 {
		// Nothing to send: both events in one write.
		s.writeEvents(ctx, id, ad, started, finished)
		return nil, false, nil
	}
	s.writeEvent(ctx, id, ad, started)
	startd := s.peer(c.addr()).Startd()
	for _, src := range in.files {
		hdr := wire.TransferHeader{ClaimID: c.id, JobID: id.String(), Name: src.name}
		info, err := xfer.Send(ctx, startd.SendInput, hdr, src.open, xfer.Options{})
		var oe *xfer.OpenError
		var ce *xfer.ChangedError
		switch {
		case errors.As(err, &oe):
			return nil, true, fmt.Errorf("%s: %w", src.what, oe.Err)
		case errors.As(err, &ce):
			return nil, true, fmt.Errorf("%s: %w", src.what, err)
		case err != nil:
			return nil, false, err
		}
		files = append(files, info)
	}
	s.writeEvent(ctx, id, ad, finished)
	return files, false, nil
}
