package startd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/startd/cgroup"
	"github.com/pond-htc/pond/condor/wire"
)

// processesWith lists the processes on the machine whose command line
// holds arg.
func processesWith(arg string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(arg)) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// uniqueSleep is a job that sleeps for a minute, with an argument no other
// process has, so that a test finds its process.
func uniqueSleep() (wire.Ad, string) {
	arg := fmt.Sprintf("61.%06d", rand.IntN(1000000))
	return testJob(map[string]string{"Cmd": `"/bin/sleep"`, "Arguments": `"` + arg + `"`, "TransferExecutable": "false"}), arg
}

// gate holds a starting job at a point (before or after its supervisor
// starts) until the test lets it go.
type gate struct {
	at      bool // the point: after the supervisor started
	reached chan struct{}
	proceed chan struct{}
	passed  atomic.Bool // the supervisor was started
	once    sync.Once
}

// newGate sets s's start hook to a gate; a test that fails opens it, so
// that the startd's shutdown does not wait for a start held forever.
func newGate(t *testing.T, s *Startd, after bool) *gate {
	g := &gate{at: after, reached: make(chan struct{}, 8), proceed: make(chan struct{})}
	t.Cleanup(g.open)
	s.onStart = func(supervised bool) {
		if supervised {
			g.passed.Store(true)
		}
		if supervised == g.at {
			g.reached <- struct{}{}
			<-g.proceed
		}
	}
	return g
}

// open lets the starts go on.
func (g *gate) open() { g.once.Do(func() { close(g.proceed) }) }

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// TestStopWhileStarting: whatever stops a slot's job (its claim released,
// a vacate, a drain, the machine's end, the startd's shutdown) stops a
// job that is still starting, whether its supervisor has yet to start it
// or has just started it: nothing of it is left running, a job stopped
// before its supervisor started never runs, a vacated one goes back to its
// schedd, and the activation is answered.
func TestStopWhileStarting(t *testing.T) {
	type action struct {
		name string
		// stop stops the job; it may block until the job is gone.
		stop func(s *Startd, claim string)
		// vacates says the schedd is told the job was evicted; released
		// that the claim is gone afterwards.
		vacates, released bool
	}
	actions := []action{
		{name: "release", released: true, stop: func(s *Startd, claim string) {
			_, _ = s.Release(context.Background(), &wire.ReleaseRequest{ClaimID: claim})
		}},
		{name: "vacate", vacates: true, stop: func(s *Startd, claim string) {
			_, _ = s.Vacate(context.Background(), &wire.VacateRequest{ClaimID: claim})
		}},
		{name: "drain", vacates: true, released: true, stop: func(s *Startd, claim string) {
			s.Drain(context.Background(), true)
		}},
		{name: "end time", vacates: true, released: true, stop: func(s *Startd, claim string) {
			s.mu.Lock()
			s.health.end = time.Now().Add(-time.Second)
			s.mu.Unlock()
			s.checkHealth()
		}},
		{name: "shutdown", stop: func(s *Startd, claim string) { s.shutdown() }},
	}
	for _, a := range actions {
		for _, after := range []bool{false, true} {
			phase := "before the supervisor"
			if after {
				phase = "after the supervisor"
			}
			t.Run(a.name+"/"+phase, func(t *testing.T) {
				fs := &fakeSchedd{}
				schedd := fs.serve(t)
				s := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "1000", "REPORT_RETRY_TIME": "5"})
				t.Cleanup(s.shutdown)
				g := newGate(t, s, after)
				job, arg := uniqueSleep()
				claim, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: job, Schedd: schedd})
				if err != nil {
					t.Fatal(err)
				}
				activated := make(chan error, 1)
				go func() {
					_, err := s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "1.0", Job: job})
					activated <- err
				}()
				waitFor(t, g.reached, "the job to start")
				// While it starts, the slot is taken: no second job
				// starts on it, and its schedd sees it active.
				_, err = s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "2.0", Job: job})
				if !errors.Is(err, wire.ErrConflict) {
					t.Errorf("a second activation while the first starts: %v, want a conflict", err)
				}
				if info, _ := s.ClaimInfo(context.Background(), &wire.ClaimInfoRequest{ClaimID: claim.ClaimID}); !info.Active || info.JobID != "1.0" {
					t.Errorf("claim info while the job starts: %+v, want job 1.0 active", info)
				}
				stopped := make(chan struct{})
				go func() {
					a.stop(s, claim.ClaimID)
					close(stopped)
				}()
				// The stop has reached the starting job before it goes on.
				eventuallyTrue(t, 10*time.Second, func() bool {
					s.mu.Lock()
					defer s.mu.Unlock()
					for _, sl := range s.claims {
						if sl.run != nil && sl.run.wasKilled() {
							return true
						}
					}
					return false
				})
				g.open()
				err = waitFor(t, activated, "the activation's answer")
				waitFor(t, stopped, a.name)
				switch {
				case !after && !a.vacates && !errors.Is(err, wire.ErrConflict):
					t.Errorf("activation of a job stopped before it started: %v, want a conflict (nothing ran)", err)
				case (after || a.vacates) && err != nil:
					t.Errorf("activation: %v", err)
				}
				if !after && g.passed.Load() {
					t.Errorf("the supervisor of a job stopped before it started was started")
				}
				if a.vacates {
					eventuallyTrue(t, 10*time.Second, func() bool {
						fs.mu.Lock()
						defer fs.mu.Unlock()
						for _, r := range fs.reports {
							if r.Kind == wire.ReportEvicted && r.JobID == "1.0" && r.Reason != "" {
								return true
							}
						}
						return false
					})
				}
				s.shutdown()
				if left := processesWith(arg); len(left) > 0 {
					t.Errorf("the job's processes are left: %v", left)
				}
				if a.released {
					s.mu.Lock()
					_, held := s.claims[claim.ClaimID]
					s.mu.Unlock()
					if held {
						t.Errorf("the claim is still held after %s", a.name)
					}
				}
				ents, _ := os.ReadDir(s.ExecuteDir())
				for _, e := range ents {
					if strings.HasPrefix(e.Name(), "dir_") {
						t.Errorf("the job's scratch directory %s is left", e.Name())
					}
				}
				fs.mu.Lock()
				defer fs.mu.Unlock()
				for _, r := range fs.reports {
					if r.Kind == wire.ReportExited || r.Kind == wire.ReportHold {
						t.Errorf("report %+v of a job stopped as it started", r)
					}
				}
			})
		}
	}
}

// TestJobsStartAtOnce: the jobs of different slots start at the same
// time: one whose supervisor is slow to start holds up no other slot's.
func TestJobsStartAtOnce(t *testing.T) {
	fs := &fakeSchedd{}
	schedd := fs.serve(t)
	s := newStartd(t, map[string]string{"NUM_CPUS": "2", "MEMORY": "1000", "REPORT_RETRY_TIME": "5"})
	t.Cleanup(s.shutdown)
	g := newGate(t, s, false)
	var claims []string
	var args []string
	var jobs []wire.Ad
	for range 2 {
		job, arg := uniqueSleep()
		c, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: job, Schedd: schedd})
		if err != nil {
			t.Fatal(err)
		}
		claims, args, jobs = append(claims, c.ClaimID), append(args, arg), append(jobs, job)
	}
	activated := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claims[i], JobID: fmt.Sprintf("%d.0", i+1), Job: jobs[i]})
			activated <- err
		}()
	}
	// Both reach their supervisor's start while neither has started.
	waitFor(t, g.reached, "the first job to start")
	waitFor(t, g.reached, "the second job to start while the first one does")
	g.open()
	for range 2 {
		if err := waitFor(t, activated, "an activation"); err != nil {
			t.Fatal(err)
		}
	}
	for _, arg := range args {
		eventuallyTrue(t, 10*time.Second, func() bool { return len(processesWith(arg)) > 0 })
	}
	for _, ad := range s.Slots() {
		if dyn, _ := ad.EvalAttr("DynamicSlot").BoolValue(); dyn {
			if act, _ := ad.EvalAttr("Activity").StringValue(); act != "Busy" {
				t.Errorf("a slot running a job is %s", act)
			}
		}
	}
	s.shutdown()
	for _, arg := range args {
		if left := processesWith(arg); len(left) > 0 {
			t.Errorf("the job's processes are left after shutdown: %v", left)
		}
	}
}

// TestStartdDiesWhileStarting: a startd killed (kill -9) just after a
// job's supervisor started the job, before the startd heard of it, leaves
// no process of the job: the supervisor dies with the startd, and the job
// with it.
func TestStartdDiesWhileStarting(t *testing.T) {
	if arg := os.Getenv("POND_TEST_STARTD_DIES"); arg != "" {
		// The startd that dies: it holds the start once the supervisor
		// started the job.
		s := newStartd(t, map[string]string{"NUM_CPUS": "1", "MEMORY": "1000"})
		s.onStart = func(supervised bool) {
			if supervised {
				if s.cont.mgr != nil {
					fmt.Println("cgroup", s.cont.mgr.Name())
				}
				fmt.Println("started")
				select {}
			}
		}
		job := testJob(map[string]string{"Cmd": `"/bin/sleep"`, "Arguments": `"` + arg + `"`, "TransferExecutable": "false"})
		claim, err := s.Claim(context.Background(), &wire.ClaimRequest{ClaimID: partitionableClaim(t, s), Job: job})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = s.Activate(context.Background(), &wire.ActivateRequest{ClaimID: claim.ClaimID, JobID: "1.0", Job: job})
		t.Fatal("the start went on")
	}
	_, arg := uniqueSleep()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestStartdDiesWhileStarting$", "-test.v")
	// What the killed startd leaves in its temporary directories goes
	// with this test's.
	cmd.Env = append(os.Environ(), "POND_TEST_STARTD_DIES="+arg, "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	cgroupName := ""
	for lines.Scan() && lines.Text() != "started" {
		if n, ok := strings.CutPrefix(lines.Text(), "cgroup "); ok {
			cgroupName = n
		}
	}
	if len(processesWith(arg)) == 0 {
		t.Fatal("the job did not start")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	eventuallyTrue(t, 10*time.Second, func() bool { return len(processesWith(arg)) == 0 })
	if cgroupName != "" {
		// The job's cgroup outlives the startd killed; its next run
		// removes it.
		m, err := cgroup.Open(cgroupName)
		if err != nil {
			t.Fatal(err)
		}
		left, err := m.Sweep()
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 1 {
			t.Fatalf("the cgroups the killed startd left: %q, want its job's", left)
		}
	}
}
