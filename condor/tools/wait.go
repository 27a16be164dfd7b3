package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
)

// waitPoll is how often condor_wait reads what was appended to the log.
const waitPoll = 200 * time.Millisecond

// Wait is condor_wait: it follows the job event log LOGFILE until every
// job submitted to it (or those of the cluster or job JOBID) has
// terminated or been aborted, or, with -num N, until N of them have;
// it prints "All jobs done." (or "Specified number of jobs (N) done.")
// and returns 0. -wait SECONDS bounds the wait: when it runs out it
// prints "Time expired." and returns 1, as it does for a log it cannot
// read. -status prints the jobs' progress, -echo every event.
func Wait(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	const tool = "condor_wait"
	c, err := parseArgs(args, specWait, env, false)
	if err != nil {
		return fail(stderr, tool, err)
	}
	if len(c.rest) == 0 || len(c.rest) > 2 {
		fmt.Fprintln(stderr, "Usage: condor_wait [-wait SECONDS] [-num NUMBER-OF-JOBS] [-status] [-echo] LOG-FILE [JOB-ID]")
		return 1
	}
	path := c.rest[0]
	if pwd := getenv(env, "PWD"); pwd != "" && !filepath.IsAbs(path) {
		path = filepath.Join(pwd, path)
	}
	match, err := jobFilter(c.rest[1:])
	if err != nil {
		return fail(stderr, tool, err)
	}
	if _, err := os.Stat(path); err != nil {
		return fail(stderr, tool, fmt.Errorf("cannot open the log file %s: %w", c.rest[0], err))
	}
	if secs, ok := c.flags["wait"]; ok {
		n, _ := strconv.Atoi(secs)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(n)*time.Second)
		defer cancel()
	}
	num := c.intFlag("num", 0)
	w := waiter{match: match, num: num, pending: map[string]bool{}, status: c.flags["status"] != "",
		echo: c.flags["echo"] != "", out: stdout}
	var offset int64
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		events, next, err := joblog.ReadFile(path, offset, time.Local)
		if err != nil {
			return fail(stderr, tool, err)
		}
		offset = next
		for _, ev := range events {
			w.see(ev)
		}
		// Judged after all that was read: the submit events of a
		// cluster's later jobs may follow the end of its first.
		if w.done() {
			if num > 0 {
				fmt.Fprintf(stdout, "Specified number of jobs (%d) done.\n", num)
			} else {
				fmt.Fprintln(stdout, "All jobs done.")
			}
			return 0
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				fmt.Fprintln(stdout, "Time expired.")
				return 1
			}
			return fail(stderr, tool, ctx.Err())
		case <-tick.C:
		}
	}
}

// jobFilter returns whether a job is one condor_wait waits for: all of
// them, or those of the cluster "C", or the job "C.P".
func jobFilter(ids []string) (func(cluster, proc int) bool, error) {
	if len(ids) == 0 {
		return func(int, int) bool { return true }, nil
	}
	cs, ps, hasProc := strings.Cut(ids[0], ".")
	cl, err := strconv.Atoi(cs)
	if err != nil || cl < 0 {
		return nil, fmt.Errorf("job id %q is neither CLUSTER nor CLUSTER.PROC", ids[0])
	}
	if !hasProc {
		return func(c, _ int) bool { return c == cl }, nil
	}
	pr, err := strconv.Atoi(ps)
	if err != nil || pr < 0 {
		return nil, fmt.Errorf("job id %q is neither CLUSTER nor CLUSTER.PROC", ids[0])
	}
	return func(c, p int) bool { return c == cl && p == pr }, nil
}

// waiter follows the events of the jobs condor_wait waits for.
type waiter struct {
	match     func(cluster, proc int) bool
	num       int
	pending   map[string]bool // submitted, not yet ended
	submitted int
	ended     int
	status    bool
	echo      bool
	out       io.Writer
}

func (w *waiter) see(ev joblog.Event) {
	if !w.match(ev.Cluster, ev.Proc) {
		return
	}
	if w.echo {
		if b, err := joblog.Format(ev, time.Local); err == nil {
			w.out.Write(b)
		}
	}
	id := ev.ID()
	switch ev.Type {
	case joblog.Submit:
		if !w.pending[id] {
			w.pending[id] = true
			w.submitted++
		}
		if w.status {
			fmt.Fprintf(w.out, "%s submitted\n", id)
		}
	case joblog.Execute:
		if w.status {
			fmt.Fprintf(w.out, "%s executing on host %s\n", id, ev.Host)
		}
	case joblog.Terminated, joblog.Aborted:
		if w.pending[id] {
			delete(w.pending, id)
			w.ended++
		}
		if w.status {
			verb := "completed"
			if ev.Type == joblog.Aborted {
				verb = "aborted"
			}
			fmt.Fprintf(w.out, "%s %s\n", id, verb)
		}
	}
}

// done reports whether the wait is over: -num jobs ended, or every job
// submitted (at least one) ended.
func (w *waiter) done() bool {
	if w.num > 0 {
		return w.ended >= w.num
	}
	return w.submitted > 0 && len(w.pending) == 0
}
