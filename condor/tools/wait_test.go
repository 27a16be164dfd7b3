package tools_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/tools"
)

// TestWait checks condor_wait against a job event log written while it
// waits: it returns 0 once the jobs it waits for have ended (all of
// them, one cluster, one job, or -num of them), and 1 when -wait runs
// out first or the log cannot be read.
func TestWait(t *testing.T) {
	ev := func(typ joblog.EventType, cluster, proc int) joblog.Event {
		e := joblog.Event{Type: typ, Cluster: cluster, Proc: proc, Time: time.Now().Truncate(time.Second)}
		if typ == joblog.Terminated {
			e.TerminatedNormally = true
		}
		if typ == joblog.Aborted {
			e.Message = "removed"
		}
		return e
	}
	sub, term, abort := joblog.Submit, joblog.Terminated, joblog.Aborted
	for _, tt := range []struct {
		name   string
		args   []string
		before []joblog.Event // in the log when condor_wait starts
		after  []joblog.Event // appended while it waits
		code   int
		out    string
	}{
		{"all jobs", nil, []joblog.Event{ev(sub, 1, 0), ev(sub, 1, 1)}, []joblog.Event{ev(term, 1, 0), ev(abort, 1, 1)}, 0, "All jobs done.\n"},
		{"already done", nil, []joblog.Event{ev(sub, 1, 0), ev(term, 1, 0)}, nil, 0, "All jobs done.\n"},
		{"one job of two", []string{"1.1"}, []joblog.Event{ev(sub, 1, 0), ev(sub, 1, 1)}, []joblog.Event{ev(term, 1, 1)}, 0, "All jobs done.\n"},
		{"one cluster", []string{"2"}, []joblog.Event{ev(sub, 1, 0), ev(sub, 2, 0)}, []joblog.Event{ev(term, 2, 0)}, 0, "All jobs done.\n"},
		{"a job still running", nil, []joblog.Event{ev(sub, 1, 0), ev(sub, 1, 1)}, []joblog.Event{ev(term, 1, 0)}, 1, "Time expired.\n"},
		{"the other cluster ends", []string{"1"}, []joblog.Event{ev(sub, 1, 0), ev(sub, 2, 0)}, []joblog.Event{ev(term, 2, 0)}, 1, "Time expired.\n"},
		{"num", []string{"-num", "1"}, []joblog.Event{ev(sub, 1, 0), ev(sub, 1, 1)}, []joblog.Event{ev(term, 1, 1)}, 0, "Specified number of jobs (1) done.\n"},
		{"no job yet", nil, nil, nil, 1, "Time expired.\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "job.log")
			w := joblog.NewWriter(log, joblog.WriterOptions{})
			if err := os.WriteFile(log, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if len(tt.before) > 0 {
				if err := w.Write(tt.before...); err != nil {
					t.Fatal(err)
				}
			}
			var args []string
			id := ""
			for _, a := range tt.args {
				if strings.HasPrefix(a, "-") || (len(args) > 0 && args[len(args)-1] == "-num") {
					args = append(args, a)
				} else {
					id = a
				}
			}
			args = append(args, "-wait", "2", "job.log")
			if id != "" {
				args = append(args, id)
			}
			go func() {
				time.Sleep(300 * time.Millisecond)
				if len(tt.after) > 0 {
					w.Write(tt.after...)
				}
			}()
			var out, errb bytes.Buffer
			code := tools.Tools()["wait"](context.Background(), args, nil, &out, &errb, []string{"PWD=" + dir})
			if code != tt.code || out.String() != tt.out {
				t.Errorf("condor_wait %q: exit %d, stdout %q, stderr %q; want %d, %q", args, code, out.String(), errb.String(), tt.code, tt.out)
			}
		})
	}
	for _, args := range [][]string{{"nope.log"}, {"-wait", "x", "job.log"}, {}, {"job.log", "1.x"}, {"-pool", "a:1", "job.log"}} {
		var out, errb bytes.Buffer
		if code := tools.Tools()["wait"](context.Background(), args, nil, &out, &errb, []string{"PWD=" + t.TempDir()}); code != 1 || errb.Len() == 0 {
			t.Errorf("condor_wait %q: exit %d, stderr %q; want 1 and a reason", args, code, errb.String())
		}
	}
}
