package schedd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// streamKey names one stream of a job running under a claim.
type streamKey struct {
	claim  string
	job    jobqueue.JobID
	stream string
}

// activeClaim returns the claim that runs job id now, and the job's ad.
func (s *Schedd) activeClaim(ctx context.Context, id jobqueue.JobID, claimID string) (*claim, *classad.Ad, error) {
	s.mu.Lock()
	c := s.active[id]
	if c == nil || c.job != id || (claimID != "" && c.id != claimID) || s.claims[c.id] != c {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: job %s does not run under that claim", wire.ErrNotFound, id)
	}
	s.mu.Unlock()
	ad, err := s.runningAd(ctx, c, id)
	if err != nil {
		return nil, nil, err
	}
	if ad == nil {
		return nil, nil, fmt.Errorf("%w: job %s no longer runs", wire.ErrNotFound, id)
	}
	return c, ad, nil
}

// StreamOutput appends a chunk of a running job's stdout or stderr to the
// job's output file, for a job that asks for it (stream_output,
// stream_error). Only the claim that runs the job may send it. The first
// chunk at offset 0 under a claim begins the file anew; a chunk already
// written (a retry after a lost answer, a starter resuming after a
// reconnect) is not written again, and one past the file's end is not
// written: the answer's Size says where the starter goes on from.
func (s *Schedd) StreamOutput(ctx context.Context, ch *wire.StreamChunk) (*wire.StreamAck, error) {
	id, err := parseJobID(ch.JobID)
	if err != nil {
		return nil, err
	}
	if len(ch.Data) > wire.MaxOutputChunk || ch.Offset < 0 {
		return nil, fmt.Errorf("%w: a chunk of %d bytes at offset %d (at most %d bytes at an offset of 0 or more)",
			wire.ErrBadRequest, len(ch.Data), ch.Offset, wire.MaxOutputChunk)
	}
	attr := map[string]string{wire.StreamStdout: "StreamOut", wire.StreamStderr: "StreamErr"}[ch.Stream]
	if attr == "" {
		return nil, fmt.Errorf("%w: unknown stream %q", wire.ErrBadRequest, ch.Stream)
	}
	c, ad, err := s.activeClaim(ctx, id, ch.ClaimID)
	if err != nil {
		return nil, err
	}
	if on, _ := ad.EvalAttr(attr).BoolValue(); !on {
		return nil, fmt.Errorf("%w: job %s does not stream its %s (%s is not true)", wire.ErrConflict, id, ch.Stream, attr)
	}
	_, p, err := outputPath(ad, wire.TransferHeader{Stream: ch.Stream})
	if err != nil {
		return nil, err
	}
	if p == "" || p == "/dev/null" {
		return &wire.StreamAck{Size: ch.Offset + int64(len(ch.Data))}, nil
	}
	key := streamKey{c.id, id, ch.Stream}
	s.mu.Lock()
	begun := s.streamed[key]
	if len(s.streamed) > 2*len(s.active)+16 {
		// Forget the streams of claims that ended.
		for k := range s.streamed {
			if cl := s.claims[k.claim]; cl == nil || cl.job != k.job {
				delete(s.streamed, k)
			}
		}
	}
	s.mu.Unlock()
	acct, err := s.jobAccount(ad)
	if err != nil {
		return nil, err
	}
	var size int64
	err = s.asUser.Do(acct, func() error {
		root, base, err := outputDir(ad, p, acct != nil)
		if err != nil {
			return err
		}
		defer root.Close()
		f, err := root.OpenFile(base, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		size = fi.Size()
		if !begun && ch.Offset == 0 {
			// This run's output begins the file.
			if err := f.Truncate(0); err != nil {
				return err
			}
			size = 0
		}
		if ch.Offset > size || ch.Offset+int64(len(ch.Data)) <= size {
			return nil // past the end, or written already
		}
		n, err := f.WriteAt(ch.Data[size-ch.Offset:], size)
		size += int64(n)
		return err
	})
	if err != nil {
		return nil, &storeError{fmt.Errorf("streaming %s to %s%s: %w", ch.Stream, p, as(acct), err)}
	}
	s.mu.Lock()
	if s.claims[c.id] == c {
		s.streamed[key] = true
	}
	c.contact = s.now()
	s.mu.Unlock()
	return &wire.StreamAck{Size: size}, nil
}

// Tail reads part of a running job's stdout or stderr from the startd
// that runs it, as condor_tail does: the job's owner or an administrator
// may.
func (s *Schedd) Tail(ctx context.Context, req *wire.JobOutputRequest) (*wire.JobOutput, error) {
	id, err := parseJobID(req.JobID)
	if err != nil {
		return nil, err
	}
	if req.Stream != wire.StreamStdout && req.Stream != wire.StreamStderr {
		return nil, fmt.Errorf("%w: unknown stream %q", wire.ErrBadRequest, req.Stream)
	}
	j, err := s.q.Get(ctx, id)
	if errors.Is(err, jobqueue.ErrNotFound) && req.Finished {
		hist, herr := s.q.History(ctx, jobqueue.HistoryQuery{Sel: jobqueue.OneJob(id), Limit: 1})
		if herr != nil {
			return nil, herr
		}
		if len(hist) == 1 {
			j, err = hist[0], nil
		}
	}
	if errors.Is(err, jobqueue.ErrNotFound) {
		return nil, fmt.Errorf("%w: job %s is not in the queue", wire.ErrNotFound, id)
	} else if err != nil {
		return nil, err
	}
	if who := callerOf(ctx); !who.admin {
		owner, _ := classad.UnquoteString(j.Ad["Owner"])
		if owner != who.name {
			return nil, fmt.Errorf("%w: job %s is %s's, not %s's", wire.ErrForbidden, id, owner, who.name)
		}
	}
	if j.Status == jobqueue.Completed && req.Finished {
		return s.tailFile(j, req)
	}
	if j.Status != jobqueue.Running {
		return nil, fmt.Errorf("%w: job %s is not running", wire.ErrConflict, id)
	}
	c, _, err := s.activeClaim(ctx, id, "")
	if err != nil {
		return nil, fmt.Errorf("%w: job %s is not running here yet", wire.ErrConflict, id)
	}
	fwd := *req
	fwd.ClaimID = c.id
	return s.peer(c.addr()).Startd().JobOutput(ctx, &fwd)
}

// tailFile reads, with its owner's rights, part of the output file of a
// job that completed (its final output is in place), as the startd reads
// that of a running job.
func (s *Schedd) tailFile(j jobqueue.Job, req *wire.JobOutputRequest) (*wire.JobOutput, error) {
	ad, err := wire.ToClassAd(j.Ad)
	if err != nil {
		return nil, err
	}
	_, p, err := outputPath(ad, wire.TransferHeader{Stream: req.Stream})
	if err != nil {
		return nil, err
	}
	if p == "" || p == "/dev/null" {
		return &wire.JobOutput{Done: true}, nil
	}
	acct, err := s.jobAccount(ad)
	if err != nil {
		return nil, err
	}
	var out wire.JobOutput
	err = s.asUser.Do(acct, func() error {
		root, base, err := outputDir(ad, p, acct != nil)
		if err != nil {
			return err
		}
		defer root.Close()
		f, err := root.OpenFile(base, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		size, off, n := fi.Size(), req.Offset, req.Max
		if n <= 0 || n > wire.MaxOutputChunk {
			n = wire.MaxOutputChunk
		}
		if off < 0 {
			off, n = max(size+off, 0), min(n, -off)
		}
		off = min(off, size)
		buf := make([]byte, min(n, size-off))
		k, err := f.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		out = wire.JobOutput{Data: buf[:k], Offset: off, Size: size, Done: true}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s of job %s%s: %w", p, j.ID, as(acct), err)
	}
	return &out, nil
}
