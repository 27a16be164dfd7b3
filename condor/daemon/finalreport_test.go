package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/wire"
)

// slowReports is a proxy in front of a node whose schedd answers each
// job's final report later than the starter waits (STARTER_REPORT_TIMEOUT):
// the first final report of a job reaches the schedd only once its starter
// has given up on it and sent it again, and the schedd's handling of it is
// cancelled as it goes, as a schedd's busy with big submits is; the repeat
// arrives meanwhile.
type slowReports struct {
	t     *testing.T
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	// first holds, by job, the first final report's forwarding until its
	// repeat arrives (closed then).
	first map[string]chan struct{}
	// delayed counts the jobs whose first final report was delayed.
	delayed int
}

func (p *slowReports) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "schedd/jobreport") {
		p.proxy.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var rep wire.JobReport
	if err := json.Unmarshal(body, &rep); err != nil || rep.Kind != wire.ReportExited {
		p.proxy.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	repeat, seen := p.first[rep.JobID]
	if !seen {
		repeat = make(chan struct{})
		p.first[rep.JobID] = repeat
		p.delayed++
	} else {
		select {
		case <-repeat:
		default:
			close(repeat)
		}
	}
	p.mu.Unlock()
	if seen {
		p.proxy.ServeHTTP(w, r)
		return
	}
	// The starter gives up on the first, and sends the report again.
	select {
	case <-repeat:
	case <-time.After(time.Minute):
		p.t.Errorf("job %s: its final report was not sent again after its starter gave up on it", rep.JobID)
	}
	// The first reaches the schedd now, which is still handling it when
	// the starter's connection goes: at once for one job, later for the
	// next, so that the repeat meets the first at each of its steps.
	p.mu.Lock()
	gone := time.Duration(p.delayed%8) * 15 * time.Millisecond
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	time.AfterFunc(gone, cancel)
	r = r.WithContext(ctx)
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.proxy.ServeHTTP(discardResponse{}, r)
}

// discardResponse is a response nobody reads: the starter gave up on it.
type discardResponse struct{}

func (discardResponse) Header() http.Header         { return http.Header{} }
func (discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (discardResponse) WriteHeader(int)             {}

// TestFinalReportRepeatedAppliedOnce runs several short jobs one after the
// other on one claim, each with its output, while the schedd answers each
// job's final report later than the starter waits: the starter sends it
// again while the schedd still applies the first, whose caller has gone.
// Every job ends exactly once (one start, one output transfer, one
// terminated event), none stays running, the claim's next job is run and
// its report accepted.
func TestFinalReportRepeatedAppliedOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front := ln.Addr().String()
	dir := t.TempDir()
	cfg := testpool.Config(t, testpool.FastKnobs(), testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"})
	// The schedd's daemons are reached through the proxy: the schedd
	// gives its address to the startds that run its jobs.
	cm, err := testpool.StartWith("cm", "", dir, nil, cfg, func(o *daemon.Options) { o.Address = front })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cm.Stop)
	target, _ := url.Parse("http://" + cm.Addr)
	p := &slowReports{t: t, proxy: httputil.NewSingleHostReverseProxy(target), first: map[string]chan struct{}{}}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	testpool.Start(t, "exec", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": front,
		"NUM_CPUS": "1", "STARTER_REPORT_TIMEOUT": "1s", "CLAIM_IDLE_TIMEOUT": "30"})
	sc := cm.Client().Schedd()
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	const jobs = 8
	submitText(t, sc, jobDir, jobOwner(t),
		"executable = /bin/echo\narguments = job $(Process)\noutput = out.$(Process)\nlog = job.log\nqueue 8\n")
	waitQueueEmpty(t, sc, jobDir)
	hist, err := sc.History(context.Background(), &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != jobs {
		t.Fatalf("%d jobs in the history, want %d", len(hist), jobs)
	}
	for _, j := range hist {
		if j.Ad["JobStatus"] != "4" || j.Ad["NumJobStarts"] != "1" {
			t.Errorf("job %s: JobStatus %s NumJobStarts %s, want completed once", j.ID, j.Ad["JobStatus"], j.Ad["NumJobStarts"])
		}
	}
	evs := jobLogEvents(t, jobDir)
	type counts struct{ execute, outFinished, terminated, evicted, held int }
	per := map[int]*counts{}
	for _, ev := range evs {
		c := per[ev.Proc]
		if c == nil {
			c = &counts{}
			per[ev.Proc] = c
		}
		switch {
		case ev.Type == joblog.Execute:
			c.execute++
		case ev.Type == joblog.FileTransfer && ev.TransferKind == joblog.TransferOutputFinished:
			c.outFinished++
		case ev.Type == joblog.Terminated:
			c.terminated++
		case ev.Type == joblog.Evicted:
			c.evicted++
		case ev.Type == joblog.Held:
			c.held++
		}
	}
	for proc := range jobs {
		c := per[proc]
		if c == nil {
			t.Errorf("job %d: no events", proc)
			continue
		}
		if *c != (counts{execute: 1, outFinished: 1, terminated: 1}) {
			t.Errorf("job %d: %d execute, %d output transfers, %d terminated, %d evicted, %d held events; want each once, none evicted or held",
				proc, c.execute, c.outFinished, c.terminated, c.evicted, c.held)
		}
		if b, err := os.ReadFile(filepath.Join(jobDir, "out."+strconv.Itoa(proc))); err != nil || !strings.HasPrefix(string(b), "job ") {
			t.Errorf("job %d: output %q, %v", proc, b, err)
		}
	}
	p.mu.Lock()
	delayed := p.delayed
	p.mu.Unlock()
	if delayed < jobs {
		t.Errorf("%d jobs' final reports were answered late, want %d", delayed, jobs)
	}
}

// waitQueueEmpty waits up to 2 minutes for every job to leave sc's queue;
// should the test fail, it logs the jobs still queued and the job log in
// jobDir.
func waitQueueEmpty(t *testing.T, sc *wire.Schedd, jobDir string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		q, _ := sc.Queue(context.Background(), &wire.QueryJobsRequest{})
		for _, j := range q {
			t.Logf("queued job %s: status %s starts %s", j.ID, j.Ad["JobStatus"], j.Ad["NumJobStarts"])
		}
		b, _ := os.ReadFile(filepath.Join(jobDir, "job.log"))
		t.Logf("job.log:\n%s", b)
	})
	testpool.Eventually(t, 120*time.Second, "every job to leave the queue", func() bool {
		q, err := sc.Queue(context.Background(), &wire.QueryJobsRequest{})
		return err == nil && len(q) == 0
	})
}
