package wire

import "context"

// The paths of a running job's output: read from its execute side
// (condor_tail) and streamed to its submit side (stream_output).
const (
	pathStartdJobOutput = "startd/joboutput"
	pathScheddTail      = "schedd/tail"
	pathScheddStream    = "schedd/streamoutput"
)

// MaxOutputChunk bounds the bytes of a job's output one call reads or
// streams.
const MaxOutputChunk = 256 << 10

// JobOutputRequest asks for part of a running job's stdout or stderr.
// Offset is where to start reading; a negative Offset reads the last
// -Offset bytes. At most Max bytes (MaxOutputChunk when 0 or more) come
// back.
type JobOutputRequest struct {
	// ClaimID names the claim the job runs under (to the startd); the
	// schedd finds it from JobID.
	ClaimID string `json:"claim_id,omitempty"`
	JobID   string `json:"job_id"`
	// Stream is StreamStdout or StreamStderr.
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
	Max    int64  `json:"max,omitempty"`
	// Finished asks the schedd, for a job that completed, to read its
	// output file in the submit directory instead (condor_tail -f reads
	// the end of what the job wrote so).
	Finished bool `json:"finished,omitempty"`
}

// JobOutput is part of a running job's output: Data starts at Offset of
// the file, which is Size bytes long now.
type JobOutput struct {
	Data   []byte `json:"data"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	// Done says the job completed: Data is from its output file, which
	// grows no more.
	Done bool `json:"done,omitempty"`
}

// StreamChunk is part of a running job's stdout or stderr the starter
// streams to the schedd (stream_output, stream_error): Data goes at
// Offset of the job's output file.
type StreamChunk struct {
	ClaimID string `json:"claim_id"`
	JobID   string `json:"job_id"`
	Stream  string `json:"stream"`
	Offset  int64  `json:"offset"`
	Data    []byte `json:"data"`
}

// StreamAck says how long the job's output file is once a chunk was
// taken: the starter sends from there next. A chunk that was already
// written (a retry) is not written again; one past the file's end is
// refused with the file's size.
type StreamAck struct {
	Size int64 `json:"size"`
}

// JobOutput reads part of the output of a job running under a claim of
// the startd.
func (c *Startd) JobOutput(ctx context.Context, req *JobOutputRequest) (*JobOutput, error) {
	var out JobOutput
	if err := c.c.Call(ctx, pathStartdJobOutput, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tail reads part of the output of a running job from its execute side,
// as condor_tail does.
func (c *Schedd) Tail(ctx context.Context, req *JobOutputRequest) (*JobOutput, error) {
	var out JobOutput
	if err := c.c.Call(ctx, pathScheddTail, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StreamOutput appends a chunk of a running job's output to its file on
// the submit side.
func (c *Schedd) StreamOutput(ctx context.Context, chunk *StreamChunk) (*StreamAck, error) {
	var ack StreamAck
	if err := c.c.Call(ctx, pathScheddStream, chunk, &ack); err != nil {
		return nil, err
	}
	return &ack, nil
}
