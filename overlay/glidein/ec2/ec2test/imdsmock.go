package ec2test

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metadataMock is the package of amazon-ec2-metadata-mock's command, a
// tool of this module (go.mod), built from the module cache.
const metadataMock = "github.com/aws/amazon-ec2-metadata-mock/cmd/ec2-metadata-mock"

// Notice is what a metadata mock tells an instance.
type Notice int

// The notices a metadata mock sends.
const (
	// SpotInterruption: spot/instance-action says the instance is
	// terminated in two minutes.
	SpotInterruption Notice = iota
	// Rebalance: events/recommendations/rebalance recommends moving off
	// the instance; no interruption notice.
	Rebalance
)

// StartMetadataMock starts amazon-ec2-metadata-mock (the real one, built
// with `go build` from the module cache) as an IMDSv2-only instance
// metadata service on a loopback port, which sends notice after delay,
// and returns its endpoint URL (for the SDK's imds client, or
// AWS_EC2_METADATA_SERVICE_ENDPOINT). The mock is killed when the test
// ends.
func StartMetadataMock(t testing.TB, notice Notice, delay time.Duration) string {
	t.Helper()
	return StartMetadataMockAt(t, FreeAddr(t), notice, delay)
}

// FreeAddr returns a loopback address HOST:PORT that nothing listens on
// now, for a metadata mock started later (StartMetadataMockAt): until
// then, a client finds no service there.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// StartMetadataMockAt is StartMetadataMock on the loopback address addr
// (HOST:PORT).
func StartMetadataMockAt(t testing.TB, addr string, notice Notice, delay time.Duration) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ec2-metadata-mock")
	build := exec.Command("go", "build", "-o", bin, metadataMock)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", metadataMock, err, out)
	}
	secs := strconv.Itoa(max(int((delay+time.Second-1)/time.Second), 0))
	never := strconv.Itoa(int((24 * time.Hour).Seconds()))
	args := []string{"spot", "-n", host, "-p", port, "--imdsv2", "--mock-ip-count", "-1"}
	switch notice {
	case SpotInterruption:
		args = append(args, "--action", "terminate", "--mock-delay-sec", secs, "--rebalance-delay-sec", never)
	case Rebalance:
		args = append(args, "--mock-delay-sec", never, "--rebalance-delay-sec", secs)
	default:
		t.Fatalf("unknown notice %d", notice)
	}
	cmd := exec.Command(bin, args...)
	// Its configuration file is looked for in $HOME: none.
	cmd.Env = append(os.Environ(), "HOME="+dir)
	log := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the metadata mock: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("metadata mock's log:\n%s", lastLines(log.String(), 30))
		}
	})
	endpoint := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// Without a token the IMDSv2-only mock answers 401: it is up.
		resp, err := http.Get(endpoint + "/latest/meta-data/")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-done:
			t.Fatalf("the metadata mock ended: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metadata mock did not start: %v", err)
		}
	}
	return endpoint
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
