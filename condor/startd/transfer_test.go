package startd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// servedStartd is a startd served over HTTP with one claimed slot.
type servedStartd struct {
	s       *Startd
	addr    string
	c       *wire.Startd
	claimID string
}

func serveStartd(t *testing.T) *servedStartd {
	t.Helper()
	s := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "1024"})
	mux := http.NewServeMux()
	prefix := wire.PathPrefix + "startd"
	mux.Handle(prefix+"/", http.StripPrefix(prefix, s.Handler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	c := wire.NewStartd(addr, "")
	resp, err := c.Claim(context.Background(), &wire.ClaimRequest{ClaimID: s.slots[0].claimID, Job: wire.Ad{"RequestMemory": "64", "Requirements": "true"}, Schedd: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	return &servedStartd{s: s, addr: addr, c: c, claimID: resp.ClaimID}
}

// sandboxFiles lists the files in the scratch directory of job 1.0, nil
// when there is none.
func (ss *servedStartd) sandboxFiles(t *testing.T) []string {
	t.Helper()
	ss.s.mu.Lock()
	dir := ss.s.sandbox(ss.s.claims[ss.claimID], "1.0")
	ss.s.mu.Unlock()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func inputStream(t *testing.T, hdr wire.TransferHeader, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	tw, err := wire.NewTransferWriter(&b, hdr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.End(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// cutPost sends the first n bytes of body as a POST to path that
// announces all of it, and closes the connection.
func cutPost(t *testing.T, addr, path string, body []byte, n int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", path, addr, wire.TransferContentType, len(body))
	if _, err := conn.Write(body[:n]); err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

// TestInputCutLeavesNothing: an input file whose connection is cut
// midway is not in the job's scratch directory, nor any part of it, and
// the job cannot be activated with it; sent again whole it is there, with
// its mode, and the job can be.
func TestInputCutLeavesNothing(t *testing.T) {
	ss := serveStartd(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 3*wire.ChunkSize/16+100)
	hdr := wire.TransferHeader{ClaimID: ss.claimID, JobID: "1.0", Name: ExecutableName, Size: int64(len(data))}
	body := inputStream(t, hdr, data)
	cutPost(t, ss.addr, wire.PathPrefix+"startd/transfer", body, len(body)/2)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The startd took the header (made the stage) and saw the cut.
		ss.s.mu.Lock()
		sl := ss.s.claims[ss.claimID]
		done := sl.stage != nil && !sl.receiving()
		ss.s.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the startd did not see the cut transfer end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if names := ss.sandboxFiles(t); len(names) != 0 {
		t.Fatalf("after a cut transfer the scratch directory holds %v", names)
	}
	script := []byte("#!/bin/sh\nexit 0\n")
	full := wire.FileInfo{Name: ExecutableName, Size: int64(len(script))}
	job := wire.Ad{"Cmd": `"/bin/true"`, "Iwd": `"/tmp"`, "RequestMemory": "64"}
	err := ss.c.Activate(ctx, &wire.ActivateRequest{ClaimID: ss.claimID, JobID: "1.0", Job: job, Inputs: []wire.FileInfo{full}})
	var we *wire.Error
	if !errors.As(err, &we) || we.Status != http.StatusConflict || !strings.Contains(err.Error(), "does not hold input file condor_exec.exe") {
		t.Fatalf("activating without the input file: %v, want HTTP 409 naming the file", err)
	}
	info, err := ss.c.SendInput(ctx, wire.TransferHeader{ClaimID: ss.claimID, JobID: "1.0", Name: ExecutableName}, func(tw *wire.TransferWriter) error {
		if _, err := tw.Write(script); err != nil {
			return err
		}
		_, err := tw.End()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if names := ss.sandboxFiles(t); len(names) != 1 || names[0] != ExecutableName {
		t.Fatalf("the scratch directory holds %v, want only %s", names, ExecutableName)
	}
	ss.s.mu.Lock()
	dir := ss.s.sandbox(ss.s.claims[ss.claimID], "1.0")
	ss.s.mu.Unlock()
	if fi, err := os.Stat(filepath.Join(dir, ExecutableName)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the executable: %v, %v; want mode 0755", fi, err)
	}
	// A manifest that does not match what arrived is refused.
	wrong := *info
	wrong.SHA256 = strings.Repeat("0", 64)
	if err := ss.c.Activate(ctx, &wire.ActivateRequest{ClaimID: ss.claimID, JobID: "1.0", Job: job, Inputs: []wire.FileInfo{wrong}}); !errors.As(err, &we) || we.Status != http.StatusConflict {
		t.Fatalf("activating with a wrong checksum: %v, want HTTP 409", err)
	}
}

// TestInputRefused: an input file for a claim the startd does not hold,
// or with a name that is not a plain file name, is refused.
func TestInputRefused(t *testing.T) {
	ss := serveStartd(t)
	for _, tt := range []struct {
		name   string
		hdr    wire.TransferHeader
		status int
	}{
		{"unknown claim", wire.TransferHeader{ClaimID: "no-such-claim", JobID: "1.0", Name: "in"}, http.StatusNotFound},
		{"a path", wire.TransferHeader{ClaimID: ss.claimID, JobID: "1.0", Name: "../in"}, http.StatusBadRequest},
		{"a partial's name", wire.TransferHeader{ClaimID: ss.claimID, JobID: "1.0", Name: partialPrefix + "x"}, http.StatusBadRequest},
		{"a stream", wire.TransferHeader{ClaimID: ss.claimID, JobID: "1.0", Stream: wire.StreamStdout}, http.StatusBadRequest},
	} {
		_, err := ss.c.SendInput(context.Background(), tt.hdr, func(tw *wire.TransferWriter) error {
			_, err := tw.End()
			return err
		})
		var we *wire.Error
		if !errors.As(err, &we) || we.Status != tt.status {
			t.Errorf("%s: %v, want HTTP %d", tt.name, err, tt.status)
		}
	}
}

// fakeSchedd is a schedd's transfer and report endpoints, served over
// HTTP: it reads outputs slowly (delay per chunk) and records the
// reports it gets and when.
type fakeSchedd struct {
	mu       sync.Mutex
	reports  []wire.JobReport
	at       []time.Time
	outputs  map[string]wire.FileInfo
	received time.Time     // when the last output arrived whole
	delay    time.Duration // per wire.ChunkSize read
}

func (f *fakeSchedd) serve(t testing.TB) string {
	t.Helper()
	f.outputs = map[string]wire.FileInfo{}
	mux := http.NewServeMux()
	mux.Handle(wire.PathPrefix+"schedd/jobreport", wire.Handle(func(ctx context.Context, r *wire.JobReport) (struct{}, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.reports = append(f.reports, *r)
		f.at = append(f.at, time.Now())
		return struct{}{}, nil
	}))
	mux.HandleFunc(wire.PathPrefix+"schedd/transfer", func(w http.ResponseWriter, r *http.Request) {
		tr, err := wire.NewTransferReader(r.Body, nil)
		if err != nil {
			wire.WriteError(w, http.StatusBadRequest, err)
			return
		}
		buf := make([]byte, wire.ChunkSize)
		for {
			n, err := tr.Read(buf)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				wire.WriteError(w, http.StatusBadRequest, err)
				return
			}
			time.Sleep(f.delay * time.Duration(n) / wire.ChunkSize)
		}
		f.mu.Lock()
		f.outputs[tr.Header().Key()] = tr.Info()
		f.received = time.Now()
		f.mu.Unlock()
		wire.WriteJSON(w, http.StatusOK, tr.Info())
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestClaimAliveUntilFinalReport: while a job's output takes longer to
// send than the claim's lease, the starter keeps renewing the claim with
// its schedd, sends the final report, with the outputs' checksums, only
// once the outputs arrived, and stops renewing once it is acknowledged.
func TestClaimAliveUntilFinalReport(t *testing.T) {
	fs := &fakeSchedd{delay: 150 * time.Millisecond}
	schedd := fs.serve(t)
	// A claim lease of 0.3 s; the output takes about 1.2 s.
	s := newStartd(t, map[string]string{"NUM_CPUS": "1", "MEMORY": "1024", "ALIVE_INTERVAL": "0.1", "MAX_CLAIM_ALIVES_MISSED": "3",
		"STARTER_POLL_INTERVAL": "0.05"})
	ctx := context.Background()
	resp, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: s.slots[0].claimID, Job: wire.Ad{"RequestMemory": "64", "Requirements": "true"}, Schedd: schedd})
	if err != nil {
		t.Fatal(err)
	}
	const size = 8 * wire.ChunkSize
	job := wire.Ad{"Cmd": `"/bin/sh"`, "Arguments": fmt.Sprintf(`"-c 'head -c %d /dev/zero > result'"`, size), "TransferExecutable": "false",
		"TransferOutput": `"result"`, "Out": `"out"`, "RequestMemory": "64", "Owner": `"nobody"`}
	if _, err := s.Activate(ctx, &wire.ActivateRequest{ClaimID: resp.ClaimID, JobID: "1.0", Job: job}); err != nil {
		t.Fatal(err)
	}
	var final time.Time
	deadline := time.Now().Add(30 * time.Second)
	for final.IsZero() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		fs.mu.Lock()
		for i, r := range fs.reports {
			if r.Kind != wire.ReportUpdate {
				final = fs.at[i]
			}
		}
		fs.mu.Unlock()
	}
	if final.IsZero() {
		t.Fatal("no final report")
	}
	time.Sleep(500 * time.Millisecond)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	// A renewal sent just before the final report was acknowledged may
	// arrive just after it; one sent later, or a renewing that goes on
	// (every 0.1 s), arrives past this.
	const inFlight = 250 * time.Millisecond
	var last wire.JobReport
	var updatesDuring, updatesAfter int
	var gap time.Duration
	prev := time.Time{}
	for i, r := range fs.reports {
		if r.Kind != wire.ReportUpdate {
			last = r
			continue
		}
		if !prev.IsZero() {
			gap = max(gap, fs.at[i].Sub(prev))
		}
		prev = fs.at[i]
		switch {
		case fs.at[i].After(final.Add(inFlight)):
			updatesAfter++
		case fs.at[i].Before(fs.received):
			updatesDuring++
		}
	}
	if last.Kind != wire.ReportExited || final.Before(fs.received) {
		t.Fatalf("final report %+v at %v, outputs in at %v", last, final, fs.received)
	}
	got := fs.outputs["result"]
	if got.Size != size || len(last.Outputs) != 2 || !slices.Contains(last.Outputs, got) {
		t.Errorf("the final report lists %+v; the schedd got %+v", last.Outputs, fs.outputs)
	}
	// One every 0.1 s; a loaded machine may delay a few.
	if updatesDuring < 4 || gap > 900*time.Millisecond {
		t.Errorf("%d renewals while the output was sent, at most %v apart; want one every 0.1 s", updatesDuring, gap)
	}
	if updatesAfter != 0 {
		t.Errorf("%d renewals after the final report was acknowledged", updatesAfter)
	}
}

// TestInputMachineFault: an input file the machine cannot write into the
// job's scratch directory is the machine's fault: the schedd is told the
// machine refuses the job (HTTP 409, so that the job goes back to the
// queue uncharged) and the failure counts against the machine's health,
// here enough to quarantine it; a quarantined machine then refuses the
// input of any job before it arrives.
func TestInputMachineFault(t *testing.T) {
	s := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "1024", KnobBlackholeFailures: "1"})
	mux := http.NewServeMux()
	prefix := wire.PathPrefix + "startd"
	mux.Handle(prefix+"/", http.StripPrefix(prefix, s.Handler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := wire.NewStartd(srv.Listener.Addr().String(), "")
	ctx := context.Background()
	resp, err := c.Claim(ctx, &wire.ClaimRequest{ClaimID: s.slots[0].claimID, Job: wire.Ad{"RequestMemory": "64", "Requirements": "true"}, Schedd: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	// The execute directory is no directory: no scratch directory can be
	// made in it (as root, taking its permissions away would not do).
	if err := os.RemoveAll(s.executeDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.executeDir(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	send := func(jobID string) error {
		_, err := c.SendInput(ctx, wire.TransferHeader{ClaimID: resp.ClaimID, JobID: jobID, Name: "in"}, func(tw *wire.TransferWriter) error {
			if _, err := tw.Write([]byte("data")); err != nil {
				return err
			}
			_, err := tw.End()
			return err
		})
		return err
	}
	err = send("1.0")
	var we *wire.Error
	if !errors.As(err, &we) || we.Status != http.StatusConflict || !strings.Contains(err.Error(), "could not write the job's input") {
		t.Fatalf("sending an input the machine cannot write: %v, want HTTP 409 saying the machine could not write it", err)
	}
	q := s.Quarantined()
	if q == nil || !strings.Contains(q.Reason, "job 1.0 could not start") {
		t.Fatalf("quarantine %+v after an input the machine could not write, want one for job 1.0", q)
	}
	if err := os.Remove(s.executeDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.executeDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	// The quarantine let the claim go.
	s.mu.Lock()
	for _, sl := range s.claims {
		if !sl.partitionable {
			t.Errorf("claim of slot %s kept by a quarantined machine", sl.name)
		}
	}
	s.mu.Unlock()
}

// TestInputRefusedWhenRetiring: a machine within POND_END_GRACE of its
// end refuses a job's input before it arrives, as it would refuse the job.
func TestInputRefusedWhenRetiring(t *testing.T) {
	ss := serveStartd(t)
	ss.s.mu.Lock()
	ss.s.health.end, ss.s.health.grace = time.Now().Add(time.Minute), 5*time.Minute
	ss.s.mu.Unlock()
	_, err := ss.c.SendInput(context.Background(), wire.TransferHeader{ClaimID: ss.claimID, JobID: "1.0", Name: "in"}, func(tw *wire.TransferWriter) error {
		_, err := tw.End()
		return err
	})
	var we *wire.Error
	if !errors.As(err, &we) || we.Status != http.StatusConflict || !strings.Contains(err.Error(), "retires") {
		t.Fatalf("sending input to a retiring machine: %v, want HTTP 409 saying it retires", err)
	}
	if names := ss.sandboxFiles(t); len(names) != 0 {
		t.Errorf("a retiring machine's scratch directory holds %v", names)
	}
}
