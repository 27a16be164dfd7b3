package wire

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
)

// Paths of the file transfer endpoints, relative to PathPrefix: a schedd
// sends a job's input files to the startd that holds its claim, and the
// startd sends the job's output back to the schedd.
const (
	pathStartdTransfer = "startd/transfer"
	pathScheddTransfer = "schedd/transfer"
)

// TransferContentType is the media type of a file transfer's body: a
// stream of frames (see TransferReader).
const TransferContentType = "application/x-pond-transfer"

// Limits of the transfer framing.
const (
	// ChunkSize is the size of the data frames a sender writes, and the
	// largest a receiver accepts: what one transfer holds in memory.
	ChunkSize = 256 << 10
	// maxHeader bounds a header frame and an abort frame's reason.
	maxHeader = 64 << 10
)

// Frame types of a transfer stream.
const (
	frameHeader = 'H' // JSON TransferHeader, first and once
	frameData   = 'D' // a chunk of the file, at most ChunkSize bytes
	frameEnd    = 'E' // the file's size (8 bytes, big-endian) and SHA-256 (32 bytes)
	frameAbort  = 'A' // the sender gives up: the reason, in UTF-8
)

// transferMagic opens every transfer stream.
const transferMagic = "PONDXFER1\n"

// Streams of a job a transfer can carry besides its files.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// TransferHeader says what file a transfer carries and for which claim:
// the receiver refuses a file whose claim is not the current one of the
// job (a stale copy from an earlier attempt).
type TransferHeader struct {
	ClaimID string `json:"claim_id"`
	JobID   string `json:"job_id"`
	// Name is the file's plain name (no directory). An output transfer
	// may instead name a Stream (StreamStdout, StreamStderr).
	Name   string `json:"name,omitempty"`
	Stream string `json:"stream,omitempty"`
	// Size is the size the sender expects to send, for progress and
	// checking only: the end frame gives the size sent.
	Size int64 `json:"size"`
	// Executable asks for the executable bit.
	Executable bool `json:"executable,omitempty"`
	// Checkpoint, when not 0, makes an output transfer a file of the
	// job's checkpoint of that number, which the schedd keeps in its
	// spool rather than where the job's output goes.
	Checkpoint int64 `json:"checkpoint,omitempty"`
}

// FileInfo is a file a transfer delivered: its name (or stream), size
// and SHA-256 (hex). Activation and a job's final report list those the
// receiver must hold, and the receiver checks them before it uses them.
type FileInfo struct {
	Name   string `json:"name,omitempty"`
	Stream string `json:"stream,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Key is how a file is known among a job's transfers: its stream, else
// its name.
func (f FileInfo) Key() string {
	if f.Stream != "" {
		return "<" + f.Stream + ">"
	}
	return f.Name
}

// Key is the key (FileInfo.Key) of the file the header announces.
func (h TransferHeader) Key() string { return FileInfo{Name: h.Name, Stream: h.Stream}.Key() }

// ErrAborted is wrapped by the error of a stream its sender aborted.
var ErrAborted = errors.New("the sender aborted the transfer")

// ErrChecksum is wrapped by the error of a stream whose data does not
// match its end frame.
var ErrChecksum = errors.New("checksum mismatch")

// TransferWriter writes a transfer stream: NewTransferWriter writes the
// header, Write the data in frames of at most ChunkSize, and End or Abort
// the last frame.
type TransferWriter struct {
	w    io.Writer
	sum  hash.Hash
	n    int64
	hdr  [5]byte
	done bool
}

// NewTransferWriter starts a transfer stream on w with hdr.
func NewTransferWriter(w io.Writer, hdr TransferHeader) (*TransferWriter, error) {
	b, err := json.Marshal(hdr)
	if err != nil {
		return nil, fmt.Errorf("encoding transfer header: %w", err)
	}
	tw := &TransferWriter{w: w, sum: sha256.New()}
	if _, err := io.WriteString(w, transferMagic); err != nil {
		return nil, err
	}
	if err := tw.frame(frameHeader, b); err != nil {
		return nil, err
	}
	return tw, nil
}

func (tw *TransferWriter) frame(kind byte, payload []byte) error {
	tw.hdr[0] = kind
	binary.BigEndian.PutUint32(tw.hdr[1:], uint32(len(payload)))
	if _, err := tw.w.Write(tw.hdr[:]); err != nil {
		return err
	}
	_, err := tw.w.Write(payload)
	return err
}

// Write sends p as data frames.
func (tw *TransferWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		c := p[:min(len(p), ChunkSize)]
		if err := tw.frame(frameData, c); err != nil {
			return written, err
		}
		tw.sum.Write(c)
		tw.n += int64(len(c))
		written += len(c)
		p = p[len(c):]
	}
	return written, nil
}

// End writes the end frame with the size and checksum of what was
// written, and returns them.
func (tw *TransferWriter) End() (FileInfo, error) {
	var end [40]byte
	binary.BigEndian.PutUint64(end[:8], uint64(tw.n))
	tw.sum.Sum(end[8:8])
	tw.done = true
	if err := tw.frame(frameEnd, end[:]); err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Size: tw.n, SHA256: hex.EncodeToString(end[8:])}, nil
}

// Abort ends the stream with a reason instead of an end frame: the
// receiver discards what it got.
func (tw *TransferWriter) Abort(reason string) error {
	tw.done = true
	if len(reason) > maxHeader {
		reason = reason[:maxHeader]
	}
	return tw.frame(frameAbort, []byte(reason))
}

// TransferReader reads a transfer stream: NewTransferReader its header,
// Read the file's data, which ends with io.EOF only after an end frame
// whose size and checksum match the data; a stream cut short, aborted,
// malformed or not matching its end frame gives an error instead, so a
// receiver that copies until io.EOF never keeps a partial file.
type TransferReader struct {
	r      *bufio.Reader
	hdr    TransferHeader
	sum    hash.Hash
	n      int64
	left   uint32 // data left in the current frame
	info   FileInfo
	err    error // sticky
	before func() error
}

// NewTransferReader reads the magic and header frame of a transfer
// stream from r. before, when not nil, is called before each frame is
// read (a server sets its read deadline there).
func NewTransferReader(r io.Reader, before func() error) (*TransferReader, error) {
	tr := &TransferReader{r: bufio.NewReaderSize(r, 64<<10), sum: sha256.New(), before: before}
	magic := make([]byte, len(transferMagic))
	if _, err := io.ReadFull(tr.r, magic); err != nil {
		return nil, fmt.Errorf("transfer stream: reading its start: %w", unexpected(err))
	}
	if string(magic) != transferMagic {
		return nil, fmt.Errorf("transfer stream: %w: it does not start with %q", ErrBadRequest, transferMagic[:len(transferMagic)-1])
	}
	kind, n, err := tr.next()
	if err != nil {
		return nil, err
	}
	if kind != frameHeader || n > maxHeader {
		return nil, fmt.Errorf("transfer stream: %w: want a header frame of at most %d bytes first, got frame %q of %d bytes", ErrBadRequest, maxHeader, kind, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(tr.r, b); err != nil {
		return nil, fmt.Errorf("transfer stream: reading its header: %w", unexpected(err))
	}
	if err := json.Unmarshal(b, &tr.hdr); err != nil {
		return nil, fmt.Errorf("transfer stream: %w: header: %w", ErrBadRequest, err)
	}
	return tr, nil
}

// Header returns the stream's header.
func (tr *TransferReader) Header() TransferHeader { return tr.hdr }

// Info returns the size and checksum of the file, once Read returned
// io.EOF.
func (tr *TransferReader) Info() FileInfo { return tr.info }

// next reads a frame's type and length.
func (tr *TransferReader) next() (byte, uint32, error) {
	if tr.before != nil {
		if err := tr.before(); err != nil {
			return 0, 0, err
		}
	}
	var h [5]byte
	if _, err := io.ReadFull(tr.r, h[:]); err != nil {
		return 0, 0, fmt.Errorf("transfer stream cut after %d bytes: %w", tr.n, unexpected(err))
	}
	return h[0], binary.BigEndian.Uint32(h[1:]), nil
}

// Read reads the file's data.
func (tr *TransferReader) Read(p []byte) (int, error) {
	if tr.err != nil {
		return 0, tr.err
	}
	for tr.left == 0 {
		if err := tr.frame(); err != nil {
			tr.err = err
			return 0, err
		}
	}
	if uint32(len(p)) > tr.left {
		p = p[:tr.left]
	}
	n, err := tr.r.Read(p)
	tr.left -= uint32(n)
	tr.n += int64(n)
	tr.sum.Write(p[:n])
	if err != nil {
		if err == io.EOF && tr.left > 0 {
			err = fmt.Errorf("transfer stream cut after %d bytes: %w", tr.n, io.ErrUnexpectedEOF)
		}
		if err != io.EOF {
			tr.err = err
			return n, err
		}
	}
	return n, nil
}

// frame reads the next frame header and, for an end or abort frame, the
// frame itself.
func (tr *TransferReader) frame() error {
	kind, n, err := tr.next()
	if err != nil {
		return err
	}
	switch kind {
	case frameData:
		if n > ChunkSize {
			return fmt.Errorf("transfer stream: %w: data frame of %d bytes, over %d", ErrBadRequest, n, ChunkSize)
		}
		tr.left = n
		return nil
	case frameEnd:
		if n != 40 {
			return fmt.Errorf("transfer stream: %w: end frame of %d bytes, want 40", ErrBadRequest, n)
		}
		var end [40]byte
		if _, err := io.ReadFull(tr.r, end[:]); err != nil {
			return fmt.Errorf("transfer stream: reading its end: %w", unexpected(err))
		}
		size := int64(binary.BigEndian.Uint64(end[:8]))
		got := tr.sum.Sum(nil)
		if size != tr.n {
			return fmt.Errorf("transfer stream: %w: %d bytes received, the sender sent %d", ErrChecksum, tr.n, size)
		}
		if string(got) != string(end[8:]) {
			return fmt.Errorf("transfer stream: %w: SHA-256 of the %d bytes received is %x, the sender's %x", ErrChecksum, tr.n, got, end[8:])
		}
		tr.info = FileInfo{Name: tr.hdr.Name, Stream: tr.hdr.Stream, Size: size, SHA256: hex.EncodeToString(got)}
		return io.EOF
	case frameAbort:
		if n > maxHeader {
			return fmt.Errorf("transfer stream: %w: abort frame of %d bytes, over %d", ErrBadRequest, n, maxHeader)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(tr.r, b); err != nil {
			return fmt.Errorf("transfer stream: reading its abort reason: %w", unexpected(err))
		}
		return fmt.Errorf("%w: %s", ErrAborted, b)
	}
	return fmt.Errorf("transfer stream: %w: unknown frame type %q", ErrBadRequest, kind)
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Send posts a transfer stream to the daemon endpoint path (relative to
// PathPrefix): write writes the stream's data to the TransferWriter it is
// given and returns the file's FileInfo, or an error that aborts the
// stream. Send returns what the receiver answered (a FileInfo).
func (c *Client) Send(ctx context.Context, path string, hdr TransferHeader, write func(*TransferWriter) error) (*FileInfo, error) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	werr := make(chan error, 1)
	go func() {
		var err error
		defer func() {
			werr <- err
			pw.CloseWithError(err)
		}()
		bw := bufio.NewWriterSize(pw, 64<<10)
		tw, err := NewTransferWriter(bw, hdr)
		if err != nil {
			return
		}
		if err = write(tw); err != nil {
			if !tw.done {
				if aerr := tw.Abort(err.Error()); aerr == nil {
					_ = bw.Flush()
				}
			}
			return
		}
		err = bw.Flush()
	}()
	var info FileInfo
	err := c.do(ctx, http.MethodPost, PathPrefix+path, TransferContentType, pr, &info)
	pr.CloseWithError(errors.New("request ended"))
	serr := <-werr
	if err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	return &info, nil
}

// SendInput sends one of a job's input files to the startd that holds
// its claim (see Client.Send).
func (c *Startd) SendInput(ctx context.Context, hdr TransferHeader, write func(*TransferWriter) error) (*FileInfo, error) {
	return c.c.Send(ctx, pathStartdTransfer, hdr, write)
}

// SendOutput sends one of a job's output files, or its stdout or stderr,
// to the schedd that holds its claim (see Client.Send).
func (c *Schedd) SendOutput(ctx context.Context, hdr TransferHeader, write func(*TransferWriter) error) (*FileInfo, error) {
	return c.c.Send(ctx, pathScheddTransfer, hdr, write)
}
