package tools

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// tailPoll is how often condor_tail -f asks for what the job wrote since.
const tailPoll = 500 * time.Millisecond

// tailMisses bounds the polls of condor_tail -f that find the job
// neither running nor completed before it gives up following it.
const tailMisses = 20

// defaultTailBytes is how much of the end of the output condor_tail shows,
// as HTCondor's -maxbytes default.
const defaultTailBytes = 1024

// Tail is condor_tail: it prints the end of the stdout (or, with -stderr,
// the stderr) of a running job, read from the machine that runs it
// through the job's schedd, at most -maxbytes N bytes of it (1024 by
// default); -f follows the output as it grows until the job completes,
// and prints the end of it from the job's output file then. Whether the job streams its output (stream_output) does not
// matter.
func Tail(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	const tool = "condor_tail"
	c, err := parseArgs(args, specTail, env, false)
	if err != nil {
		return fail(stderr, tool, err)
	}
	if len(c.rest) != 1 {
		fmt.Fprintln(stderr, "Usage: condor_tail [-pool ADDR] [-name SCHEDD] [-f] [-stderr] [-maxbytes N] CLUSTER.PROC")
		return 1
	}
	id, err := jobqueue.ParseJobID(c.rest[0])
	if err != nil {
		return fail(stderr, tool, err)
	}
	maxBytes := int64(defaultTailBytes)
	if v, ok := c.flags["maxbytes"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return fail(stderr, tool, fmt.Errorf("-maxbytes wants a positive number of bytes, not %q", v))
		}
		maxBytes = n
	}
	stream := wire.StreamStdout
	if c.flags["stderr"] != "" {
		stream = wire.StreamStderr
	}
	sc, _, err := scheddOf(ctx, c, env)
	if err != nil {
		return fail(stderr, tool, err)
	}
	req := &wire.JobOutputRequest{JobID: id.String(), Stream: stream, Offset: -maxBytes, Max: maxBytes}
	follow := c.flags["f"] != ""
	tick := time.NewTicker(tailPoll)
	defer tick.Stop()
	first, misses := true, 0
	for {
		out, err := sc.Tail(ctx, req)
		if err != nil {
			if !first && follow && misses < tailMisses {
				// Between running and completed (its output on its
				// way): ask again, a while at most (a job removed or
				// held stops there).
				misses++
				select {
				case <-ctx.Done():
					return 0
				case <-tick.C:
				}
				continue
			}
			return fail(stderr, tool, err)
		}
		first, misses = false, 0
		// Once the job runs, -f goes on to the end of its output file
		// when it completes.
		req.Finished = follow
		if _, err := stdout.Write(out.Data); err != nil {
			return 1
		}
		next := out.Offset + int64(len(out.Data))
		if !follow || (out.Done && next >= out.Size) {
			return 0
		}
		req.Offset, req.Max = next, wire.MaxOutputChunk
		if next < out.Size {
			continue // more is there already
		}
		select {
		case <-ctx.Done():
			return 0
		case <-tick.C:
		}
	}
}
