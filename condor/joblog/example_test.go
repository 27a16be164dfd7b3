package joblog_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
)

func Example() {
	dir, _ := os.MkdirTemp("", "joblog")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "job.log")
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	w := joblog.NewWriter(path, joblog.WriterOptions{Location: time.UTC})
	_ = w.Write(
		joblog.Event{Type: joblog.Submit, Cluster: 1, Time: at, Host: "<127.0.0.1:9618>"},
		joblog.Event{Type: joblog.Terminated, Cluster: 1, Time: at.Add(time.Second), TerminatedNormally: true, ReturnValue: 0},
	)
	data, _ := os.ReadFile(path)
	fmt.Print(string(data[:84]))
	events, _, _ := joblog.ReadFile(path, 0, time.UTC)
	for _, ev := range events {
		fmt.Println(ev.Type, ev.ID(), ev.TerminatedNormally)
	}
	// Output:
	// 000 (001.000.000) 2026-11-22 12:00:00 Job submitted from host: <127.0.0.1:9618>
	// ...
	// SubmitEvent 1.0 false
	// JobTerminatedEvent 1.0 true
}
