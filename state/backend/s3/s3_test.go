package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
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

	"github.com/pond-htc/pond/state"
)

// moto is the S3 server the tests talk to, started once by TestMain.
type moto struct {
	endpoint string
	skip     string
}

var server moto

// helperEnv, when set, makes the test binary a helper process that adds
// POND_S3_N increments to the counter in POND_S3_BUCKET on the moto server
// at POND_S3_ENDPOINT.
const helperEnv = "POND_STATE_S3_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helper())
	}
	stop := startMoto()
	code := m.Run()
	stop()
	os.Exit(code)
}

func helper() int {
	ctx := context.Background()
	b, err := New(ctx, Config{
		Bucket: os.Getenv("POND_S3_BUCKET"), Key: "env/pond.state", Region: "us-east-1",
		Endpoint: os.Getenv("POND_S3_ENDPOINT"), ForcePathStyle: true, AccessKey: "test", SecretKey: "test",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, _ := strconv.Atoi(os.Getenv("POND_S3_N"))
	for range n {
		if err := increment(ctx, b); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
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
	server.endpoint = endpoint
	return stop
}

var bucketSeq atomic.Int64

// newBackend returns a backend on a fresh bucket of the moto server.
func newBackend(t *testing.T) *Backend {
	t.Helper()
	if server.skip != "" {
		t.Skip(server.skip)
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
	b, err := New(context.Background(), Config{
		Bucket: bucket, Key: "env/pond.state", Region: "us-east-1",
		Endpoint: server.endpoint, ForcePathStyle: true,
		AccessKey: "test", SecretKey: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
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

func TestReadWriteBackup(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	if s, err := b.Read(ctx); s != nil || err != nil {
		t.Fatalf("Read of a missing object = %v, %v; want nil, nil", s, err)
	}
	s := state.New()
	s.Outputs["a"] = &state.Output{Value: json.RawMessage(`"1"`)}
	if err := b.Write(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s.Serial != 1 {
		t.Fatalf("serial = %d, want 1", s.Serial)
	}
	if _, found := object(t, b, b.backupKey()); found {
		t.Fatal("backup after the first write")
	}
	first, _ := object(t, b, b.key)

	same := s.DeepCopy()
	if err := b.Write(ctx, same); err != nil {
		t.Fatal(err)
	}
	if _, found := object(t, b, b.backupKey()); found || same.Serial != 1 {
		t.Fatalf("an unchanged write wrote (serial %d)", same.Serial)
	}

	s.Outputs["a"].Value = json.RawMessage(`"2"`)
	if err := b.Write(ctx, s); err != nil {
		t.Fatal(err)
	}
	backup, _ := object(t, b, b.backupKey())
	if !bytes.Equal(backup, first) {
		t.Fatalf("backup = %s, want %s", backup, first)
	}
	got, err := b.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Serial != 2 || s.Serial != 2 || string(got.Outputs["a"].Value) != `"2"` || got.Lineage != s.Lineage {
		t.Fatalf("Read = %+v", got)
	}
}

func TestBadDocumentsRefusedAndUntouched(t *testing.T) {
	good, err := state.Encode(state.New())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		doc  []byte
		want string
	}{
		{"truncated", good[:len(good)/2], "truncated state document"},
		{"corrupt", bytes.Replace(good, []byte(`"serial"`), []byte(`"serial" x`), 1), "corrupt state document"},
		{"newer", bytes.Replace(good, []byte(`"format_version": 1`), []byte(`"format_version": 3`), 1), "state was written by a newer pond (format 3); this pond reads format 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			b := newBackend(t)
			put(t, b, b.key, tt.doc)
			_, err := b.Read(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), b.URL()) {
				t.Fatalf("Read error = %v, want one naming %s and containing %q", err, b.URL(), tt.want)
			}
			err = b.Write(ctx, state.New())
			if err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
				t.Fatalf("Write error = %v, want a refusal", err)
			}
			after, _ := object(t, b, b.key)
			if !bytes.Equal(after, tt.doc) {
				t.Fatal("the document was changed")
			}
			if _, found := object(t, b, b.backupKey()); found {
				t.Fatal("a backup was written")
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

func TestLock(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	info := state.NewLockInfo("apply", "v1")
	id, err := b.Lock(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := object(t, b, b.lockKey())
	var stored state.LockInfo
	if err := json.Unmarshal(data, &stored); err != nil || stored.ID != id || stored.Path != b.URL() {
		t.Fatalf("lock object %s: %v", data, err)
	}

	other := newClient(t, b.bucket)
	_, err = other.Lock(ctx, state.NewLockInfo("plan", ""))
	var le *state.LockError
	if !errors.As(err, &le) || !errors.Is(err, state.ErrLocked) || le.Info.ID != id || le.HolderGone {
		t.Fatalf("second Lock error = %#v", err)
	}
	if err := other.Unlock(ctx, "wrong"); err == nil || !strings.Contains(err.Error(), `lock ID "wrong" does not match`) {
		t.Fatalf("Unlock with a wrong id: %v", err)
	}
	if err := other.ForceUnlock(ctx, "wrong"); err == nil {
		t.Fatal("ForceUnlock with a wrong id succeeded")
	}
	if err := b.Unlock(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock(ctx, id); err == nil || !strings.Contains(err.Error(), "not locked") {
		t.Fatalf("second Unlock: %v", err)
	}
	id2, err := other.Lock(ctx, state.NewLockInfo("plan", ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ForceUnlock(ctx, id2); err != nil {
		t.Fatal(err)
	}
}

func TestDeadHolder(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	// A process that has exited: its pid is free.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	info := state.NewLockInfo("apply", "")
	info.PID = cmd.Process.Pid
	data, _ := json.Marshal(info)
	put(t, b, b.lockKey(), data)
	_, err := b.Lock(ctx, state.NewLockInfo("apply", ""))
	var le *state.LockError
	if !errors.As(err, &le) || !le.HolderGone || !strings.Contains(err.Error(), "pondctl force-unlock "+info.ID) {
		t.Fatalf("Lock error = %v, want a stale lock hint", err)
	}
}

func TestLockContention(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	const workers, each = 3, 3
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t, b.bucket)
			for range each {
				if err := increment(ctx, c); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s, err := b.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(s.Outputs["counter"].Value); got != strconv.Itoa(workers*each) {
		t.Fatalf("counter = %s, want %d", got, workers*each)
	}
}

func increment(ctx context.Context, b *Backend) error {
	id, err := state.LockWait(ctx, b, state.NewLockInfo("increment", ""), time.Minute)
	if err != nil {
		return err
	}
	defer b.Unlock(ctx, id)
	s, err := b.Read(ctx)
	if err != nil {
		return err
	}
	if s == nil {
		s = state.New()
	}
	n := 0
	if o := s.Outputs["counter"]; o != nil {
		if err := json.Unmarshal(o.Value, &n); err != nil {
			return err
		}
	}
	s.Outputs["counter"] = &state.Output{Value: json.RawMessage(strconv.Itoa(n + 1))}
	return b.Write(ctx, s)
}

func TestLockContentionProcesses(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	const procs, each = 2, 4
	var cmds []*exec.Cmd
	for range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=1", "POND_S3_BUCKET="+b.bucket,
			"POND_S3_ENDPOINT="+server.endpoint, "POND_S3_N="+strconv.Itoa(each))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	s, err := b.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(s.Outputs["counter"].Value); got != strconv.Itoa(procs*each) {
		t.Fatalf("counter = %s, want %d", got, procs*each)
	}
}
