package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/state"
	"github.com/pond-htc/pond/state/backend/backendtest"
)

// moto is the S3 server the tests talk to, started once by TestMain;
// endpoint is the proxy in front of it.
type moto struct {
	endpoint string
	skip     string
}

var server moto

// Environment of a helper process of the conformance suite: the bucket
// and the moto server holding the state.
const (
	bucketEnv   = "POND_S3_BUCKET"
	endpointEnv = "POND_S3_ENDPOINT"
)

func TestMain(m *testing.M) {
	backendtest.RunHelper(func(ctx context.Context) (state.Backend, error) {
		return New(ctx, testConfig(os.Getenv(bucketEnv), os.Getenv(endpointEnv)))
	})
	stop := startMoto()
	code := m.Run()
	stop()
	os.Exit(code)
}

// testConfig is the configuration of the test state in bucket on the moto
// server at endpoint.
func testConfig(bucket, endpoint string) Config {
	return Config{
		Bucket: bucket, Key: "env/pond.state", Region: "us-east-1",
		Endpoint: endpoint, ForcePathStyle: true,
		AccessKey: "test", SecretKey: "test",
	}
}

// startMoto starts moto's server on a free loopback port, or records why
// it cannot.
func startMoto() func() {
	if err := exec.Command("python3", "-c", "import moto.server").Run(); err != nil {
		server.skip = "moto is not installed: pip install 'moto[server]'"
		return func() {}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		server.skip = "no free port: " + err.Error()
		return func() {}
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("python3", "-m", "moto.server", "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		server.skip = "cannot start moto: " + err.Error()
		return func() {}
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			server.skip = "moto did not start: " + err.Error()
			return func() {}
		}
		time.Sleep(50 * time.Millisecond)
	}
	// moto checks a conditional write's precondition and then writes, in
	// two steps, so that two simultaneous conditional writes can both
	// succeed; S3 makes them one. The tests reach moto through a proxy
	// that passes one request at a time, which gives its conditional
	// writes S3's atomicity.
	target, err := url.Parse(endpoint)
	if err != nil {
		stop()
		server.skip = "moto's address: " + err.Error()
		return func() {}
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var one sync.Mutex
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		one.Lock()
		defer one.Unlock()
		rp.ServeHTTP(w, r)
	}))
	server.endpoint = proxy.URL
	return func() {
		proxy.Close()
		stop()
	}
}

var bucketSeq atomic.Int64

// newBackend returns a backend on a fresh bucket of the moto server.
func newBackend(t *testing.T) *Backend {
	t.Helper()
	if server.skip != "" {
		testenv.SkipOrFail(t, server.skip)
	}
	ctx := context.Background()
	bucket := fmt.Sprintf("pond-test-%d-%d", os.Getpid(), bucketSeq.Add(1))
	b := newClient(t, bucket)
	if _, err := b.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return b
}

// newClient returns another backend (with its own client) on bucket.
func newClient(t *testing.T, bucket string) *Backend {
	t.Helper()
	b, err := New(context.Background(), testConfig(bucket, server.endpoint))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// store is the state object in a fresh bucket.
type store struct{ b *Backend }

func newStore(t *testing.T) backendtest.Store { return store{newBackend(t)} }

func (s store) Open(t *testing.T) state.Backend { return newClient(t, s.b.bucket) }
func (s store) Location() string                { return s.b.URL() }
func (s store) Env() []string {
	return []string{bucketEnv + "=" + s.b.bucket, endpointEnv + "=" + server.endpoint}
}

func (s store) key(t *testing.T, obj backendtest.Object) string {
	t.Helper()
	switch obj {
	case backendtest.StateObject:
		return s.b.key
	case backendtest.BackupObject:
		return s.b.backupKey()
	case backendtest.LockObject:
		return s.b.lockKey()
	}
	t.Fatalf("no object for the %v", obj)
	return ""
}

func (s store) Get(t *testing.T, obj backendtest.Object) ([]byte, bool) {
	t.Helper()
	return object(t, s.b, s.key(t, obj))
}

func (s store) Put(t *testing.T, obj backendtest.Object, data []byte) {
	t.Helper()
	put(t, s.b, s.key(t, obj), data)
}

func TestConformance(t *testing.T) {
	if server.skip != "" {
		testenv.SkipOrFail(t, server.skip)
	}
	backendtest.Run(t, newStore)
}

func object(t *testing.T, b *Backend, key string) ([]byte, bool) {
	t.Helper()
	data, _, found, err := b.get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return data, found
}

func put(t *testing.T, b *Backend, key string, data []byte) {
	t.Helper()
	if _, err := b.client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: &b.bucket, Key: aws.String(key), Body: bytes.NewReader(data),
	}); err != nil {
		t.Fatal(err)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Key: "k", Region: "r"}, `"bucket" is required`},
		{Config{Bucket: "b", Region: "r"}, `"key" is required`},
		{Config{Bucket: "b", Key: "k", Region: "r", AccessKey: "a"}, `"access_key" and "secret_key" must be given together`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := New(context.Background(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestConditionalWrites checks that the store honours the conditions the
// backend relies on.
func TestConditionalWrites(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	put(t, b, "obj", []byte("one"))
	tests := []struct {
		name string
		in   *s3.PutObjectInput
	}{
		{"If-None-Match on an existing object", &s3.PutObjectInput{IfNoneMatch: aws.String("*")}},
		{"If-Match with another ETag", &s3.PutObjectInput{IfMatch: aws.String(`"0123456789abcdef0123456789abcdef"`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Bucket, tt.in.Key, tt.in.Body = &b.bucket, aws.String("obj"), strings.NewReader("two")
			_, err := b.client.PutObject(ctx, tt.in)
			if !conditionFailed(err) {
				t.Fatalf("PutObject error = %v, want a failed condition", err)
			}
			if data, _ := object(t, b, "obj"); string(data) != "one" {
				t.Fatalf("object changed to %q", data)
			}
		})
	}
}

// TestWriteRefusesConcurrentChange: a write based on a document that was
// replaced meanwhile must fail rather than overwrite it.
func TestWriteRefusesConcurrentChange(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	s := state.New()
	if err := b.Write(ctx, s); err != nil {
		t.Fatal(err)
	}
	_, _, etag, err := b.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := s.DeepCopy()
	other.Outputs["x"] = &state.Output{Value: json.RawMessage(`1`)}
	if err := newClient(t, b.bucket).Write(ctx, other); err != nil {
		t.Fatal(err)
	}
	// The replacement as Write does it, with the stale ETag.
	_, err = b.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &b.bucket, Key: &b.key, Body: strings.NewReader("{}"), IfMatch: aws.String(etag)})
	if !conditionFailed(err) {
		t.Fatalf("stale conditional write: %v", err)
	}
	got, err := b.Read(ctx)
	if err != nil || got.Outputs["x"] == nil {
		t.Fatalf("Read = %+v, %v: the concurrent write was lost", got, err)
	}
}
