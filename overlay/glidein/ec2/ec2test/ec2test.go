// Package ec2test starts moto (moto[server]) as the EC2, SSM and STS
// endpoint of a test, on a loopback port, with test credentials in the
// environment.
//
// Starting moto takes seconds (Python imports every AWS service it
// fakes): a package whose tests each need an empty moto calls Shared,
// which starts one for the whole package and empties it for each test, and
// StopShared from its TestMain. StartMoto starts one for a single test.
package ec2test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// Region is the region of the test's AWS configuration.
const Region = "us-east-1"

// Env is the environment of a test against moto: its test credentials
// and Region, and neither the machine's AWS configuration files nor its
// instance metadata service.
func Env() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":           "test",
		"AWS_SECRET_ACCESS_KEY":       "test",
		"AWS_REGION":                  Region,
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED":   "true",
	}
}

// StartMoto starts moto's server for the test and returns its endpoint
// URL; the server is killed when the test ends. It sets Env in the
// environment, which a parallel test cannot do: a package whose parallel
// tests start moto sets Env in its TestMain, and StartMoto then finds
// every variable already set. Without moto the test is skipped, or fails
// when CI is set.
func StartMoto(t testing.TB) string {
	t.Helper()
	requireMoto(t)
	m, err := startMoto()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.stop)
	setEnv(t)
	return m.endpoint
}

// shared is the moto of a package's tests (Shared): started by the first
// test that asks for it, held by one test at a time, stopped by
// StopShared.
var shared struct {
	once sync.Once
	m    *motoServer
	err  error
	// held is taken by the test using the server, from Shared to its end.
	held sync.Mutex
}

// Shared returns the endpoint of the package's moto, started by the first
// test that asks for it, and empties it (moto's reset): the test finds it
// as a fresh one, with nothing of the tests before. The test has it to
// itself until it ends: another test calling Shared waits until then, so
// the tests that share it run one after another against it, whether or
// not they are parallel. Like StartMoto, it sets Env in the environment,
// which a parallel test cannot do: a package whose parallel tests share
// moto sets Env in its TestMain. The package's TestMain stops it with
// StopShared.
func Shared(t testing.TB) string {
	t.Helper()
	requireMoto(t)
	shared.once.Do(func() { shared.m, shared.err = startMoto() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	shared.held.Lock()
	t.Cleanup(shared.held.Unlock)
	if err := shared.m.reset(); err != nil {
		t.Fatal(err)
	}
	setEnv(t)
	return shared.m.endpoint
}

// StopShared stops the package's moto (Shared), if a test started it. A
// TestMain calls it after m.Run.
func StopShared() {
	if shared.m != nil {
		shared.m.stop()
	}
}

// requireMoto skips the test when moto's server cannot be imported, or
// fails it when CI is set.
func requireMoto(t testing.TB) {
	t.Helper()
	if err := exec.Command("python3", "-c", "import moto.server").Run(); err != nil {
		testenv.SkipOrFailf(t, "moto is not installed (pip install 'moto[server]'): %v", err)
	}
}

// setEnv sets Env in the test's environment, where it is not already.
func setEnv(t testing.TB) {
	for k, v := range Env() {
		if os.Getenv(k) != v {
			t.Setenv(k, v)
		}
	}
}

// motoServer is a running moto server.
type motoServer struct {
	endpoint string
	cmd      *exec.Cmd
}

// startMoto starts moto's server on a port the kernel picks as moto binds
// it, and waits until it says where it listens and answers there. A port
// picked here and handed to moto could be taken by another process (a
// parallel test's moto) during moto's seconds of imports, and a test
// would then talk to another test's moto.
func startMoto() (*motoServer, error) {
	cmd := exec.Command("python3", "-m", "moto.server", "-H", "127.0.0.1", "-p", "0")
	// A test binary killed before its cleanups (a timeout, a panic)
	// takes moto with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting moto: %w", err)
	}
	m := &motoServer{cmd: cmd}
	// The banner names the port; the rest (a line a request) is read and
	// dropped, so that moto never blocks on a full pipe.
	listening, drained := make(chan string, 1), make(chan struct{})
	var head strings.Builder // the output before the banner, for an error
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "* Running on "); ok {
				listening <- u
				break
			}
			if head.Len() < 4096 {
				head.WriteString(sc.Text() + "\n")
			}
		}
		close(listening)
		_, _ = io.Copy(io.Discard, out)
		close(drained)
	}()
	// Its imports take seconds on a loaded machine.
	timeout := time.After(90 * time.Second)
	select {
	case u, ok := <-listening:
		if !ok {
			<-drained // Wait closes the pipe: every read is done first
			err := cmd.Wait()
			return nil, fmt.Errorf("moto did not start (%v): %s", err, head.String())
		}
		m.endpoint = u
	case <-timeout:
		m.stop()
		return nil, errors.New("moto did not say where it listens within 90s")
	}
	for {
		resp, err := http.Get(m.endpoint + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return m, nil
		}
		select {
		case <-timeout:
			m.stop()
			return nil, fmt.Errorf("moto did not answer at %s: %w", m.endpoint, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reset empties the server of every resource, as moto's own reset does.
func (m *motoServer) reset() error {
	resp, err := http.Post(m.endpoint+"/moto-api/reset", "application/json", nil)
	if err != nil {
		return fmt.Errorf("resetting moto: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("resetting moto: " + resp.Status)
	}
	return nil
}

func (m *motoServer) stop() {
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
}
