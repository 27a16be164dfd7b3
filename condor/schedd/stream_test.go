package schedd_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// TestStreamOutput streams a running job's stdout to its file in chunks:
// the first begins the file anew, a chunk sent again is not written
// twice, one past the end writes nothing and says where to go on from,
// and only the job's claim may stream, only what the job asks to stream.
func TestStreamOutput(t *testing.T) {
	t.Parallel()
	n := start(t)
	ctx := context.Background()
	resp := n.submitFile("alice", "executable = /bin/echo\noutput = out.$(Process)\nerror = err.$(Process)\nstream_output = true\nqueue 2\n")
	for p := range 2 {
		id := jobqueue.JobID{Cluster: resp.Cluster, Proc: p}
		attrs := jobqueue.Ad{"PondClaimId": strconv.Quote("claim-" + strconv.Itoa(p)), "RemoteHost": `"slot1@exec"`}
		if err := n.s.Queue().Transition(ctx, id, jobqueue.Running, attrs); err != nil {
			t.Fatal(err)
		}
	}
	n.restart()
	out := filepath.Join(n.jobs, "out.0")
	if err := os.WriteFile(out, []byte("an earlier run's output\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chunk := func(claim, stream string, off int64, data string) (int64, error) {
		ack, err := n.c.StreamOutput(ctx, &wire.StreamChunk{ClaimID: claim, JobID: "1.0", Stream: stream, Offset: off, Data: []byte(data)})
		if err != nil {
			return -1, err
		}
		return ack.Size, nil
	}
	for _, st := range []struct {
		name   string
		claim  string
		stream string
		off    int64
		data   string
		size   int64
		status int
		file   string
	}{
		{"first chunk begins the file", "claim-0", "stdout", 0, "one\n", 4, 0, "one\n"},
		{"the same chunk again", "claim-0", "stdout", 0, "one\n", 4, 0, "one\n"},
		{"next chunk", "claim-0", "stdout", 4, "two\n", 8, 0, "one\ntwo\n"},
		{"a chunk overlapping the end", "claim-0", "stdout", 4, "two\nthree\n", 14, 0, "one\ntwo\nthree\n"},
		{"a chunk past the end", "claim-0", "stdout", 20, "five\n", 14, 0, "one\ntwo\nthree\n"},
		{"another job's claim", "claim-1", "stdout", 14, "x", -1, http.StatusNotFound, "one\ntwo\nthree\n"},
		{"a stream the job does not stream", "claim-0", "stderr", 0, "x", -1, http.StatusConflict, "one\ntwo\nthree\n"},
		{"an unknown stream", "claim-0", "stdin", 0, "x", -1, http.StatusBadRequest, "one\ntwo\nthree\n"},
	} {
		size, err := chunk(st.claim, st.stream, st.off, st.data)
		if status(err) != st.status || size != st.size {
			t.Errorf("%s: size %d, %v; want size %d, HTTP status %d", st.name, size, err, st.size, st.status)
		}
		if b, _ := os.ReadFile(out); string(b) != st.file {
			t.Errorf("%s: out.0 is %q, want %q", st.name, b, st.file)
		}
	}
	// A schedd restarted meanwhile goes on where the file ends.
	n.restart()
	if size, err := chunk("claim-0", "stdout", 14, "four\n"); err != nil || size != 19 {
		t.Errorf("after a restart: size %d, %v, want 19", size, err)
	}
	if b, _ := os.ReadFile(out); string(b) != "one\ntwo\nthree\nfour\n" {
		t.Errorf("after a restart: out.0 is %q", b)
	}
	big := make([]byte, wire.MaxOutputChunk+1)
	if _, err := chunk("claim-0", "stdout", 19, string(big)); status(err) != http.StatusBadRequest {
		t.Errorf("a chunk over %d bytes: %v, want HTTP 400", wire.MaxOutputChunk, err)
	}
}
