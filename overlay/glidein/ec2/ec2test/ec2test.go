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

	"github.com/pond-htc/pond/internal/testenv"
)

// Region is the region of the test's AWS configuration.
const Region = "us-east-1"

// StartMoto starts moto's server for the test and returns its endpoint
// URL; the server is killed when the test ends. It sets AWS_REGION and
// test credentials in the environment (so it cannot be used by parallel
// tests). Without moto the test is skipped, or fails when CI is set.
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
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", Region)
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return endpoint
}
