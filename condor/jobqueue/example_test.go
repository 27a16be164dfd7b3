package jobqueue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pond-htc/pond/condor/jobqueue"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "jobqueue")
	defer os.RemoveAll(dir)
	q, err := jobqueue.Open(ctx, filepath.Join(dir, "job_queue.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	cluster, _ := q.Submit(ctx, []jobqueue.Ad{
		{"Owner": `"alice"`, "Cmd": `"/bin/echo"`, "Arguments": `"hello"`},
		{"Owner": `"alice"`, "Cmd": `"/bin/echo"`, "Arguments": `"world"`},
	})
	id := jobqueue.JobID{Cluster: cluster, Proc: 0}
	_ = q.Transition(ctx, id, jobqueue.Running, jobqueue.Ad{"RemoteHost": `"slot1@node1"`})
	_ = q.Transition(ctx, id, jobqueue.Completed, jobqueue.Ad{"ExitCode": "0"})
	idle, _ := q.Idle(ctx)
	for _, j := range idle {
		fmt.Println("idle:", j.ID, j.Ad["Arguments"])
	}
	err = q.Transition(ctx, jobqueue.JobID{Cluster: cluster, Proc: 1}, jobqueue.Completed, nil)
	fmt.Println(err)
	hist, _ := q.History(ctx, jobqueue.HistoryQuery{Limit: 10})
	for _, j := range hist {
		fmt.Println("history:", j.ID, j.Status, j.Ad["ExitCode"])
	}
	// Output:
	// idle: 1.1 "world"
	// job 1.1 cannot go from Idle to Completed
	// history: 1.0 Completed 0
}
