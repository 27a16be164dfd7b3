package daemon_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/condor/startd/jobshim"
	"github.com/pond-htc/pond/condor/wire"
)

const childEnv = "POND_DAEMON_TEST_CHILD"

// TestMain lets a test re-execute the test binary as a node process that a
// test can kill -9.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		// spec: name|addr|dir|condor_host[|NAME=value,...], a schedd
		// unless the knobs set another DAEMON_LIST.
		f := strings.Split(spec, "|")
		knobs := testpool.Knobs{"DAEMON_LIST": "MASTER, SCHEDD", "CONDOR_HOST": f[3]}
		if len(f) > 4 {
			for _, kv := range strings.Split(f[4], ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					knobs[k] = v
				}
			}
		}
		cfg, err := testpool.ConfigErr(testpool.FastKnobs(), knobs)
		if err == nil {
			_, err = testpool.StartErr(f[0], f[1], f[2], nil, cfg)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		select {}
	}
	os.Exit(m.Run())
}

func queued(t *testing.T, c *wire.Client) []wire.Job {
	t.Helper()
	jobs, err := c.Schedd().Queue(context.Background(), &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// TestMemoryOverRequestIsHeld runs, under each job supervisor
// POND_JOB_SUPERVISOR chooses, a job that grows past its request_memory,
// which is held, and a job that says which supervisor is the first process
// of its PID namespace: the one the machine ad says.
func TestMemoryOverRequestIsHeld(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{startd.SupervisorResident, startd.SupervisorPerJob} {
		t.Run(mode, func(t *testing.T) {
			cm, _ := pool(t, 1, testpool.Knobs{startd.KnobJobSupervisor: mode})
			machine := machineAd(t, cm, startd.IsolationAttr, startd.SupervisorAttr)
			want := mode
			if os.Geteuid() != 0 || !strings.Contains(machine[startd.IsolationAttr], "pid-namespace") {
				want = startd.SupervisorPerJob
			}
			if got := strings.Trim(machine[startd.SupervisorAttr], `"`); got != want {
				t.Errorf("%s = %s, want %q", startd.SupervisorAttr, machine[startd.SupervisorAttr], want)
			}
			dir := t.TempDir()
			submitFile(t, cm, dir, "executable = /bin/sh\narguments = \"-c 'tail /dev/zero'\"\ntransfer_executable = false\nrequest_memory = 20\nlog = job.log\nqueue\n")
			submitFile(t, cm, dir, "executable = /bin/cat\narguments = /proc/1/cmdline\ntransfer_executable = false\noutput = init.out\nqueue\n")
			testpool.Eventually(t, 30*time.Second, "the job to be held and the other to end", func() bool {
				j := queued(t, cm.Client())
				return len(j) == 1 && j[0].Ad["JobStatus"] == "5"
			})
			j := queued(t, cm.Client())[0]
			if !strings.Contains(j.Ad["HoldReason"], "memory limit of 20 megabytes") || j.Ad["HoldReasonCode"] != "34" {
				t.Errorf("HoldReason %s, HoldReasonCode %s", j.Ad["HoldReason"], j.Ad["HoldReasonCode"])
			}
			log, _ := os.ReadFile(filepath.Join(dir, "job.log"))
			if !strings.Contains(string(log), "Job was held.") || !strings.Contains(string(log), "memory limit") {
				t.Errorf("job log:\n%s", log)
			}
			if strings.Contains(machine[startd.IsolationAttr], "pid-namespace") {
				b, _ := os.ReadFile(filepath.Join(dir, "init.out"))
				init, _, _ := strings.Cut(string(b), "\x00")
				wantInit := jobshim.Name
				if want == startd.SupervisorResident {
					wantInit = jobshim.ResidentName
				}
				if init != wantInit {
					t.Errorf("the job's PID namespace's first process is %q, want %q", b, wantInit)
				}
			}
		})
	}
}

// machineAd returns the attributes attrs of the pool's one machine ad, as
// expressions.
func machineAd(t *testing.T, cm *testpool.Node, attrs ...string) map[string]string {
	t.Helper()
	var ads []map[string]string
	testpool.Eventually(t, 10*time.Second, "a machine ad", func() bool {
		got, err := cm.Client().Collector().Query(context.Background(), &wire.QueryAdsRequest{Type: wire.TypeMachine, Projection: attrs})
		if err != nil {
			t.Fatal(err)
		}
		ads = got
		return len(ads) > 0
	})
	return ads[0]
}

func act(t *testing.T, cm *testpool.Node, action string, cluster int) {
	t.Helper()
	changed, err := cm.Client().Schedd().Act(context.Background(), &wire.ActRequest{Action: action, Args: []string{fmt.Sprint(cluster)}})
	if err != nil || changed.Count == 0 {
		t.Fatalf("%s %d: %v %v", action, cluster, changed, err)
	}
}

func slotNames(t testing.TB, cm *testpool.Node) string {
	t.Helper()
	ads, err := cm.Client().Collector().Query(context.Background(), &wire.QueryAdsRequest{Type: wire.TypeMachine, Projection: []string{"Name"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range ads {
		names = append(names, strings.Trim(a["Name"], `"`))
	}
	return strings.Join(names, ",")
}

func TestReconfigMovesStartd(t *testing.T) {
	t.Parallel()
	knobs := testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR"}
	cm1 := testpool.Start(t, "cm1", "", "", nil, knobs)
	cm2 := testpool.Start(t, "cm2", "", "", nil, knobs)
	execKnobs := testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD"}
	ex := testpool.Start(t, "exec", "", "", nil, execKnobs, testpool.Knobs{"CONDOR_HOST": cm1.Addr})
	testpool.Eventually(t, 10*time.Second, "startd in cm1", func() bool { return slotNames(t, cm1) == "slot1@exec" })
	for _, step := range []struct{ to, from *testpool.Node }{{cm2, cm1}, {cm1, cm2}} {
		cfg := testpool.Config(t, testpool.FastKnobs(), execKnobs, testpool.Knobs{"CONDOR_HOST": step.to.Addr})
		if err := ex.Master.Reconfig(cfg); err != nil {
			t.Fatal(err)
		}
		if got := ex.Master.CollectorAddress(); got != step.to.Addr {
			t.Fatalf("collector address %s, want %s", got, step.to.Addr)
		}
		testpool.Eventually(t, 10*time.Second, "startd to move to "+step.to.Name, func() bool {
			return slotNames(t, step.to) == "slot1@exec" && slotNames(t, step.from) == ""
		})
	}
}

func TestScheddKilledLosesNoJob(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	cm, dir := scheddTestPool(t)
	// A free port for the schedd's node, reused across restarts.
	addr := freeAddr(t)
	start := func() *exec.Cmd { return startChildSchedd(t, addr, dir, cm) }
	child := start()
	c := wire.NewSchedd(addr, testpool.Token(t, "admin", auth.Administrator, auth.Daemon))
	jobDir := t.TempDir()
	sub := "executable = /bin/sh\narguments = \"-c 'sleep 0.3; echo done $(Process)'\"\noutput = out.$(Process)\nlog = job.log\nqueue 30\n"
	submitText(t, c, jobDir, jobOwner(t), sub)
	// Kill the schedd while jobs run.
	testpool.Eventually(t, 30*time.Second, "jobs to run", func() bool {
		done, _ := c.History(context.Background(), &wire.QueryJobsRequest{})
		return len(done) >= 5
	})
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	start()
	testpool.Eventually(t, 60*time.Second, "every job to complete", func() bool {
		done, err := c.History(context.Background(), &wire.QueryJobsRequest{})
		return err == nil && len(done) == 30
	})
	for p := 0; p < 30; p++ {
		b, err := os.ReadFile(filepath.Join(jobDir, fmt.Sprintf("out.%d", p)))
		if err != nil || string(b) != fmt.Sprintf("done %d\n", p) {
			t.Errorf("out.%d = %q, %v", p, b, err)
		}
	}
}

// scheddTestPool starts a central manager without a schedd and an execute
// node, trusting the test pools' key, and returns the central manager's
// address and a directory for a schedd's queue that outlives its process.
func scheddTestPool(t *testing.T) (cm, dir string) {
	t.Helper()
	m := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR"})
	testpool.Start(t, "exec1", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": m.Addr})
	dir, err := os.MkdirTemp("", "pond-schedd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	return m.Addr, dir
}

// freeAddr returns an API address no node listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	probe := testpool.Start(t, "probe", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER"})
	probe.Stop()
	return probe.Addr
}

// startChildSchedd runs a schedd node in a child process at addr, on the
// queue in dir, reporting to cm, and waits until it answers; the test can
// kill it with SIGKILL.
func startChildSchedd(t *testing.T, addr, dir, cm string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=submit|"+addr+"|"+dir+"|"+cm)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := wire.NewMaster(addr, testpool.Token(t, "admin", auth.Administrator, auth.Daemon))
	testpool.Eventually(t, 20*time.Second, "the schedd to start", func() bool {
		_, err := c.Info(context.Background())
		return err == nil
	})
	return cmd
}
