// Package xfer moves a job's files between the schedd and the startd as
// streams (condor/wire's transfer framing) under a bounded memory budget:
// a sender reads a file in chunks of wire.ChunkSize and checks it did not
// change while it was read; a receiver writes it to a temporary file that
// takes its name only once the SHA-256 of what arrived matches the
// sender's. A transfer that stalls or is cut is retried from its start,
// and one that keeps failing gives an error that says why.
package xfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// bufs holds the chunk buffers of transfers in progress.
var bufs = sync.Pool{New: func() any { b := make([]byte, wire.ChunkSize); return &b }}

// ChangedError is the error of a file that changed or vanished while it
// was read for a transfer.
type ChangedError struct {
	Name string
	Why  string // "changed", "was removed", ...
}

// Error implements error.
func (e *ChangedError) Error() string {
	return fmt.Sprintf("%s %s while it was transferred", e.Name, e.Why)
}

// DefaultStall is how long a transfer may make no progress before the
// sender gives the attempt up, and the receiver the stream.
const DefaultStall = 60 * time.Second

// ErrStalled is the cause of a transfer canceled because no data moved
// for the stall timeout.
var ErrStalled = errors.New("the transfer made no progress")

// Copy writes the open regular file f, named name in messages, to tw and
// ends the stream; moved, when not nil, counts the bytes written. It
// fails with a *ChangedError when the file's size or modification time
// changed while it was read, or the file was removed.
func Copy(tw *wire.TransferWriter, f *os.File, name string, moved *atomic.Int64) (wire.FileInfo, error) {
	before, err := f.Stat()
	if err != nil {
		return wire.FileInfo{}, err
	}
	if !before.Mode().IsRegular() {
		return wire.FileInfo{}, fmt.Errorf("%s is not a regular file", name)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return wire.FileInfo{}, err
	}
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	n, err := io.CopyBuffer(counter{tw, moved}, struct{ io.Reader }{f}, *bp)
	if err != nil {
		return wire.FileInfo{}, err
	}
	after, err := f.Stat()
	if err != nil {
		return wire.FileInfo{}, err
	}
	switch {
	case n != before.Size() || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()):
		return wire.FileInfo{}, &ChangedError{Name: name, Why: "changed"}
	case removed(after):
		return wire.FileInfo{}, &ChangedError{Name: name, Why: "was removed"}
	}
	return tw.End()
}

// counter counts what it writes to w in n.
type counter struct {
	w io.Writer
	n *atomic.Int64
}

func (c counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if c.n != nil {
		c.n.Add(int64(n))
	}
	return n, err
}

// removed reports whether the file whose information fi is has no name
// left.
func removed(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}

// Receive copies the data of tr into f, and returns what arrived once
// the stream's end frame matched it. progress, when not nil, is called
// after each chunk.
func Receive(tr *wire.TransferReader, f *os.File, progress func(n int64)) (wire.FileInfo, error) {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := *bp
	var total int64
	for {
		n, err := tr.Read(buf)
		if n > 0 {
			if _, werr := f.Write(buf[:n]); werr != nil {
				return wire.FileInfo{}, werr
			}
			total += int64(n)
			if progress != nil {
				progress(total)
			}
		}
		if err == io.EOF {
			return tr.Info(), nil
		}
		if err != nil {
			return wire.FileInfo{}, err
		}
	}
}

// Options tune Send.
type Options struct {
	// Attempts is how many times a file is sent before Send gives up
	// (default 3).
	Attempts int
	// Stall cancels an attempt during which no data moved for this long
	// (default DefaultStall).
	Stall time.Duration
	// Backoff is the wait before the second attempt, doubled for each
	// further one (default 200 ms).
	Backoff time.Duration
}

// OpenError is the error of a file Send could not open.
type OpenError struct{ Err error }

// Error implements error.
func (e *OpenError) Error() string { return e.Err.Error() }

// Unwrap returns the error of opening the file.
func (e *OpenError) Unwrap() error { return e.Err }

// Sender is a wire call that sends a transfer stream: Startd.SendInput or
// Schedd.SendOutput.
type Sender func(ctx context.Context, hdr wire.TransferHeader, write func(*wire.TransferWriter) error) (*wire.FileInfo, error)

// Send sends the file open opens, as hdr says, with send: each attempt
// opens the file again. A file that cannot be opened fails at once with
// an *OpenError; one that changes while it is read, a stalled or cut
// connection, a receiver's 5xx answer or a checksum mismatch are retried
// up to opts.Attempts times; another answer of the receiver (it holds no
// such claim, say) fails at once. The result is what the receiver
// stored.
func Send(ctx context.Context, send Sender, hdr wire.TransferHeader, open func() (*os.File, error), opts Options) (wire.FileInfo, error) {
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	if opts.Stall <= 0 {
		opts.Stall = DefaultStall
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 200 * time.Millisecond
	}
	name := hdr.Key()
	var last error
	backoff := opts.Backoff
	for attempt := 1; attempt <= opts.Attempts; attempt++ {
		if attempt > 1 {
			select {
			case <-ctx.Done():
				return wire.FileInfo{}, fmt.Errorf("sending %s: %w (after: %w)", name, ctx.Err(), last)
			case <-time.After(backoff):
			}
			backoff *= 2
		}
		info, err := sendOnce(ctx, send, hdr, open, opts.Stall)
		if err == nil {
			return info, nil
		}
		var oe *OpenError
		if errors.As(err, &oe) || !retryable(err) || ctx.Err() != nil {
			return wire.FileInfo{}, err
		}
		last = err
	}
	return wire.FileInfo{}, fmt.Errorf("%w (%d attempts)", last, opts.Attempts)
}

// retryable reports whether an attempt's error may go away on its own.
func retryable(err error) bool {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Status >= 500 || we.Status == http.StatusBadRequest
	}
	return true // a changed file, a cut or stalled connection
}

func sendOnce(ctx context.Context, send Sender, hdr wire.TransferHeader, open func() (*os.File, error), stall time.Duration) (wire.FileInfo, error) {
	f, err := open()
	if err != nil {
		return wire.FileInfo{}, &OpenError{err}
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		hdr.Size = fi.Size()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var moved atomic.Int64
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(max(stall/4, 10*time.Millisecond))
		defer t.Stop()
		last, since := int64(-1), time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if m := moved.Load(); m != last {
					last, since = m, time.Now()
				} else if time.Since(since) > stall {
					cancel(fmt.Errorf("%w for %v", ErrStalled, stall))
					return
				}
			}
		}
	}()
	var local wire.FileInfo
	var own error // the sender's own error: the file changed, say
	got, err := send(ctx, hdr, func(tw *wire.TransferWriter) error {
		local, own = Copy(tw, f, hdr.Key(), &moved)
		return own
	})
	var ce *ChangedError
	switch {
	case errors.As(own, &ce):
		return wire.FileInfo{}, own
	case errors.Is(context.Cause(ctx), ErrStalled):
		return wire.FileInfo{}, fmt.Errorf("sending %s: %w", hdr.Key(), context.Cause(ctx))
	case err != nil:
		return wire.FileInfo{}, fmt.Errorf("sending %s: %w", hdr.Key(), err)
	case own != nil:
		return wire.FileInfo{}, fmt.Errorf("sending %s: %w", hdr.Key(), own)
	case got.SHA256 != local.SHA256 || got.Size != local.Size:
		return wire.FileInfo{}, fmt.Errorf("sending %s: %w: the receiver stored %d bytes with SHA-256 %s, %d bytes with %s were sent",
			hdr.Key(), wire.ErrChecksum, got.Size, got.SHA256, local.Size, local.SHA256)
	}
	local.Name, local.Stream = hdr.Name, hdr.Stream
	return local, nil
}
