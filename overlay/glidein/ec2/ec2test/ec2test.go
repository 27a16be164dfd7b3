// Package ec2test starts moto (moto[server]) as the EC2, SSM and STS
// endpoint of a test, on a loopback port, with test credentials in the
// environment.
package ec2test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
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
	if err := exec.Command("python3", "-c", "import moto.server").Run(); err != nil {
		testenv.SkipOrFailf(t, "moto is not installed (pip install 'moto[server]'): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("python3", "-m", "moto.server", "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting moto: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(endpoint + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("moto did not start: %v", err)
		}
	}
	for k, v := range Env() {
		if os.Getenv(k) != v {
			t.Setenv(k, v)
		}
	}
	return endpoint
}
