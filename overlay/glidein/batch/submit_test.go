package batch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// toy is a batch system of two shell commands: submit (slow: it waits
// before it queues, as a busy controller does) makes a file
// QUEUE/TAG.N and prints N; find lists the N of a tag. It is as much as
// another batch system needs to give: the rest is batch's.
type toy struct{ queue, bin string }

func newToy(t *testing.T) toy {
	t.Helper()
	dir := t.TempDir()
	y := toy{queue: filepath.Join(dir, "queue"), bin: dir}
	if err := os.Mkdir(y.queue, 0o700); err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{
		// submit TAG [refuse]
		"submit": `[ "$2" = refuse ] && { echo "no such queue" >&2; exit 1; }
sleep 0.2
n=$(ls "` + y.queue + `" | wc -l); n=$((n+1)); touch "` + y.queue + `/$1.$n"; echo $n`,
		"find": `for f in "` + y.queue + `/$1".*; do [ -e "$f" ] && echo "${f##*.}"; done; exit 0`,
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return y
}

func (y toy) FindCmd(tag string) remote.Cmd {
	return remote.Cmd{Path: filepath.Join(y.bin, "find"), Args: []string{tag}}
}

func (y toy) ParseSubmit(out []byte) (string, error) {
	id := strings.TrimSpace(string(out))
	if _, err := strconv.Atoi(id); err != nil {
		return "", errors.New("not a job id: " + id)
	}
	return id, nil
}

func (y toy) jobs(t *testing.T, tag string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(y.queue, tag+".*"))
	return m
}

func run(ctx context.Context, c remote.Cmd) ([]byte, error) {
	out, stderr, err := remote.Local{}.Run(ctx, c)
	if err != nil {
		return out, errors.Join(err, errors.New(string(stderr)))
	}
	return out, nil
}

// TestSubmitOnce submits one tag from many submitters at once: one job,
// the others told it exists; an output file in the directory (a job that
// ran and was forgotten) is a duplicate too; a refused submission is
// ErrRefused.
func TestSubmitOnce(t *testing.T) {
	y := newToy(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	job := batch.Job{Tag: "pond-a", Dir: dir, Output: "out-*", Submit: remote.Cmd{Path: filepath.Join(y.bin, "submit"), Args: []string{"pond-a"}}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	dups := 0
	for range 8 {
		wg.Go(func() {
			id, err := batch.Submit(ctx, run, y, job)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ids = append(ids, id)
			case errors.Is(err, glidein.ErrDuplicate):
				dups++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := y.jobs(t, "pond-a"); len(ids) != 1 || dups != 7 || len(got) != 1 {
		t.Fatalf("8 submissions of one tag: IDs %v, %d duplicates, jobs %v; want one job", ids, dups, got)
	}

	job.Tag, job.Submit.Args = "pond-b", []string{"pond-b"}
	if err := os.WriteFile(filepath.Join(dir, "out-7"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := batch.Submit(ctx, run, y, job); !errors.Is(err, glidein.ErrDuplicate) || !strings.Contains(err.Error(), "out-7") {
		t.Fatalf("with an output in the directory: %v, want ErrDuplicate naming it", err)
	}

	job.Dir = t.TempDir()
	job.Submit.Args = []string{"pond-b", "refuse"}
	if _, err := batch.Submit(ctx, run, y, job); !errors.Is(err, batch.ErrRefused) || !strings.Contains(err.Error(), "no such queue") {
		t.Fatalf("refused: %v, want ErrRefused saying why", err)
	}
	if got := y.jobs(t, "pond-b"); len(got) != 0 {
		t.Fatalf("jobs %v after a refusal", got)
	}
}

// TestSubmitLost: a submission whose context ends while the submit
// command runs (as a lost connection) waits, under the lock, for that
// command to return and reports the job it made.
func TestSubmitLost(t *testing.T) {
	y := newToy(t)
	dir := t.TempDir()
	// A submit command that outlives its caller: detached from it, as a
	// command on a login node outlives the SSH connection.
	slow := filepath.Join(y.bin, "slow")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 1\nexec "+filepath.Join(y.bin, "submit")+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	detached := func(ctx context.Context, c remote.Cmd) ([]byte, error) {
		if len(c.Args) > 4 && c.Args[3] == "submit" {
			// Started in the background, its result lost.
			bg := remote.Cmd{Path: "/bin/sh", Args: []string{"-c", remote.CommandLine(c) + " > /dev/null 2>&1 &"}}
			if _, err := run(ctx, bg); err != nil {
				return nil, err
			}
			// Lost while it ran: it took the lock meanwhile.
			time.Sleep(300 * time.Millisecond)
			return nil, remote.ErrLost
		}
		return run(ctx, c)
	}
	job := batch.Job{Tag: "pond-c", Dir: dir, Output: "out-*", Submit: remote.Cmd{Path: slow, Args: []string{"pond-c"}}}
	id, err := batch.Submit(context.Background(), detached, y, job)
	if err != nil {
		t.Fatalf("lost submission: %v, want the job it made", err)
	}
	if got := y.jobs(t, "pond-c"); len(got) != 1 || !strings.HasSuffix(got[0], "."+id) {
		t.Fatalf("jobs %v, Submit said %s", got, id)
	}
}
