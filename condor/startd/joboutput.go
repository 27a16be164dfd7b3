package startd

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// streamInterval is how often a job's streamed output is sent to its
// schedd: at most wire.MaxOutputChunk per stream each time.
const streamInterval = time.Second

// stdioName is the file in the job's scratch directory a stream goes to.
func stdioName(stream string) (string, error) {
	switch stream {
	case wire.StreamStdout:
		return "_condor_stdout", nil
	case wire.StreamStderr:
		return "_condor_stderr", nil
	}
	return "", fmt.Errorf("%w: unknown stream %q", wire.ErrBadRequest, stream)
}

// readOutput reads at most max bytes (wire.MaxOutputChunk when 0 or
// more) of a job's output file in its scratch directory dir from offset
// (the last -offset bytes when negative). The file is opened inside dir
// without following a link out of it, and only a regular file is read: a
// job cannot point it at a file only the startd may read, nor make the
// read wait.
func readOutput(dir, stream string, offset, max int64) (*wire.JobOutput, error) {
	name, err := stdioName(stream)
	if err != nil {
		return nil, err
	}
	if max <= 0 || max > wire.MaxOutputChunk {
		max = wire.MaxOutputChunk
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: the job's %s is not a regular file", wire.ErrConflict, stream)
	}
	size := fi.Size()
	if offset < 0 {
		offset = size + offset
		max = min(max, size-offset)
	}
	offset = min(max0(offset), size)
	buf := make([]byte, min(max, size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return &wire.JobOutput{Data: buf[:n], Offset: offset, Size: size}, nil
}

func max0(v int64) int64 {
	if v < 0 {
		return 0
	}
	return v
}

// JobOutput reads part of the stdout or stderr of the job running under a
// claim (condor_tail, through the job's schedd).
func (s *Startd) JobOutput(ctx context.Context, req *wire.JobOutputRequest) (*wire.JobOutput, error) {
	s.mu.Lock()
	sl := s.claims[req.ClaimID]
	if sl == nil || sl.partitionable || sl.run == nil || sl.jobID != req.JobID {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: no job %s runs under that claim", wire.ErrNotFound, req.JobID)
	}
	dir := s.sandbox(sl, sl.jobID)
	s.mu.Unlock()
	return readOutput(dir, req.Stream, req.Offset, req.Max)
}

// streamOutputs sends the stdout and stderr of a job that asks for it
// (StreamOut, StreamErr) to its schedd as they grow, every
// streamInterval, each from where the schedd's file ends: a chunk whose
// answer was lost is sent again and the schedd does not write it twice.
// The function it returns stops the sending and waits for it.
func (s *Startd) streamOutputs(sl *slot, req *wire.ActivateRequest, job *classad.Ad, dir string) func() {
	var streams []string
	for stream, attr := range map[string]string{wire.StreamStdout: "StreamOut", wire.StreamStderr: "StreamErr"} {
		if on, _ := job.EvalAttr(attr).BoolValue(); on {
			streams = append(streams, stream)
		}
	}
	if len(streams) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(s.stop)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		offsets := map[string]int64{}
		t := time.NewTicker(streamInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, stream := range streams {
				s.streamOnce(ctx, sl, req, dir, stream, offsets)
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// streamOnce sends the schedd what a stream has past where its file ends,
// a chunk at most.
func (s *Startd) streamOnce(ctx context.Context, sl *slot, req *wire.ActivateRequest, dir, stream string, offsets map[string]int64) {
	out, err := readOutput(dir, stream, offsets[stream], wire.MaxOutputChunk)
	if err != nil {
		return
	}
	_, sent := offsets[stream]
	if len(out.Data) == 0 && sent {
		return
	}
	s.mu.Lock()
	schedd := sl.schedd
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ack, err := s.peer(schedd).Schedd().StreamOutput(cctx, &wire.StreamChunk{ClaimID: req.ClaimID, JobID: req.JobID,
		Stream: stream, Offset: out.Offset, Data: out.Data})
	if err != nil {
		s.log.Debug("streaming a job's output", "job", req.JobID, "stream", stream, "err", err)
		return
	}
	offsets[stream] = ack.Size
}
