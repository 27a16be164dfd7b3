package xfer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// receiver is a server that stores what it is sent in dir, as the
// daemons do: a temporary file that takes its name once whole. onChunk,
// when set, is called after each chunk it stores.
type receiver struct {
	dir     string
	onChunk func(n int64)
	srv     *httptest.Server
	stored  atomic.Int32
	// active counts the transfers being received.
	active atomic.Int32
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rv := &receiver{dir: t.TempDir()}
	mux := http.NewServeMux()
	mux.HandleFunc(wire.PathPrefix+"startd/transfer", func(w http.ResponseWriter, r *http.Request) {
		rv.active.Add(1)
		defer rv.active.Add(-1)
		tr, err := wire.NewTransferReader(r.Body, nil)
		if err != nil {
			wire.WriteError(w, http.StatusBadRequest, err)
			return
		}
		f, err := os.CreateTemp(rv.dir, ".partial-*")
		if err != nil {
			wire.WriteError(w, http.StatusInternalServerError, err)
			return
		}
		info, err := Receive(tr, f, func(n int64) {
			if rv.onChunk != nil {
				rv.onChunk(n)
			}
		})
		f.Close()
		if err != nil {
			os.Remove(f.Name())
			wire.WriteError(w, http.StatusBadRequest, err)
			return
		}
		if err := os.Rename(f.Name(), filepath.Join(rv.dir, tr.Header().Name)); err != nil {
			wire.WriteError(w, http.StatusInternalServerError, err)
			return
		}
		rv.stored.Add(1)
		wire.WriteJSON(w, http.StatusOK, info)
	})
	rv.srv = httptest.NewServer(mux)
	t.Cleanup(rv.srv.Close)
	return rv
}

// cutter is a TCP proxy to addr that cuts each of the first cuts
// connections after it forwarded limit bytes of the request.
type cutter struct {
	ln    net.Listener
	cuts  atomic.Int32
	limit int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func newCutter(t *testing.T, addr string, cuts int, limit int64) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, limit: limit}
	c.cuts.Store(int32(cuts))
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			cut := c.cuts.Add(-1) >= 0
			c.wg.Add(2)
			go func() {
				defer c.wg.Done()
				if cut {
					_, _ = io.CopyN(out, in, c.limit)
					in.Close()
					out.Close()
					return
				}
				_, _ = io.Copy(out, in)
				out.(*net.TCPConn).CloseWrite()
			}()
			go func() {
				defer c.wg.Done()
				_, _ = io.Copy(in, out)
				in.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		c.mu.Lock()
		for _, conn := range c.conns {
			conn.Close()
		}
		c.mu.Unlock()
		c.wg.Wait()
	})
	return c
}

// source writes size random bytes to a file and returns its path and
// SHA-256.
func source(t *testing.T, size int) (string, string) {
	t.Helper()
	b := make([]byte, size)
	_, _ = rand.Read(b)
	p := filepath.Join(t.TempDir(), "in.dat")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return p, hex.EncodeToString(sum[:])
}

func opener(p string) func() (*os.File, error) { return func() (*os.File, error) { return os.Open(p) } }

// leftovers lists the files in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// settled lists the files in the receiver's directory once it had time
// to notice the end of a transfer its sender gave up (it sees the cut or
// the abort soon after): when it has received nothing for a while, or
// after 10s.
func settled(t *testing.T, rv *receiver) []string {
	t.Helper()
	const quiet = 300 * time.Millisecond
	deadline := time.Now().Add(10 * time.Second)
	var since time.Time
	for time.Now().Before(deadline) {
		if rv.active.Load() != 0 || len(leftovers(t, rv.dir)) != 0 {
			since = time.Time{}
		} else if since.IsZero() {
			since = time.Now()
		} else if time.Since(since) >= quiet {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return leftovers(t, rv.dir)
}

func send(ctx context.Context, addr, path string) (wire.FileInfo, error) {
	c := wire.NewStartd(addr, "")
	return Send(ctx, c.SendInput, wire.TransferHeader{ClaimID: "c", JobID: "1.0", Name: "in.dat"}, opener(path), Options{Backoff: 10 * time.Millisecond})
}

// TestSendRetriesACutConnection: connections cut in the middle of the
// file make the sender start again, and the receiver keeps only the whole
// file; cut more often than the attempts allow, the sender gives up and
// the receiver has nothing.
func TestSendRetriesACutConnection(t *testing.T) {
	p, sum := source(t, 3*wire.ChunkSize+123)
	for _, tt := range []struct {
		name string
		cuts int
		ok   bool
	}{{"no cut", 0, true}, {"two cuts", 2, true}, {"cut every time", 3, false}} {
		t.Run(tt.name, func(t *testing.T) {
			rv := newReceiver(t)
			c := newCutter(t, rv.srv.Listener.Addr().String(), tt.cuts, wire.ChunkSize+1000)
			info, err := send(context.Background(), c.ln.Addr().String(), p)
			switch {
			case tt.ok && err != nil:
				t.Fatalf("Send: %v", err)
			case tt.ok:
				b, err := os.ReadFile(filepath.Join(rv.dir, "in.dat"))
				got := sha256.Sum256(b)
				if err != nil || hex.EncodeToString(got[:]) != sum || info.SHA256 != sum {
					t.Fatalf("stored %d bytes with SHA-256 %x (sent %s), %v", len(b), got, info.SHA256, err)
				}
				if names := leftovers(t, rv.dir); len(names) != 1 {
					t.Errorf("the receiver's directory holds %v, want only in.dat", names)
				}
			case err == nil:
				t.Fatal("Send through a connection cut every time succeeded")
			default:
				if !strings.Contains(err.Error(), "3 attempts") {
					t.Errorf("error %q does not say the attempts were used up", err)
				}
				if names := settled(t, rv); len(names) != 0 {
					t.Errorf("a transfer that never completed left %v", names)
				}
			}
		})
	}
}

// TestSendChangedFile: a file that changes, or is removed, while it is
// read is retried and, when it keeps changing, fails with a
// *ChangedError that says so; the receiver keeps nothing. A file that
// cannot be opened fails at once with an *OpenError.
func TestSendChangedFile(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(p string) error
		want   string
	}{
		{"appended to", func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString("more")
			return err
		}, "in.dat changed while it was transferred"},
		{"removed", os.Remove, "in.dat was removed while it was transferred"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Larger than what the sockets' buffers hold: the sender
			// still reads when the receiver has its first chunk.
			const size = 96 * wire.ChunkSize
			p, _ := source(t, size)
			rv := newReceiver(t)
			var changes atomic.Int32
			rv.onChunk = func(n int64) {
				if n == wire.ChunkSize {
					changes.Add(1)
					if err := tt.change(p); err != nil && !errors.Is(err, os.ErrNotExist) {
						t.Error(err)
					}
				}
			}
			attempts := 0
			open := func() (*os.File, error) {
				attempts++
				if attempts > 1 && tt.name == "removed" {
					// Put it back, to be removed again.
					if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
						return nil, err
					}
				}
				return os.Open(p)
			}
			c := wire.NewStartd(rv.srv.Listener.Addr().String(), "")
			_, err := Send(context.Background(), c.SendInput, wire.TransferHeader{Name: "in.dat"}, open, Options{Backoff: time.Millisecond})
			var ce *ChangedError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Send: %v, want a *ChangedError with %q", err, tt.want)
			}
			if attempts != 3 || changes.Load() != 3 {
				t.Errorf("%d attempts, %d changes; want 3 of each", attempts, changes.Load())
			}
			if names := settled(t, rv); len(names) != 0 {
				t.Errorf("the receiver kept %v of a file that changed", names)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		rv := newReceiver(t)
		_, err := send(context.Background(), rv.srv.Listener.Addr().String(), filepath.Join(t.TempDir(), "gone"))
		var oe *OpenError
		if !errors.As(err, &oe) || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Send of a missing file: %v, want an *OpenError for a missing file", err)
		}
	})
}

// TestSendStalled: a receiver that stops reading makes the attempt give
// up after the stall timeout, not hang.
func TestSendStalled(t *testing.T) {
	p, _ := source(t, 64*wire.ChunkSize)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	c := wire.NewStartd(srv.Listener.Addr().String(), "")
	start := time.Now()
	_, err := Send(context.Background(), c.SendInput, wire.TransferHeader{Name: "in.dat"}, opener(p), Options{Attempts: 1, Stall: 200 * time.Millisecond})
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("Send to a receiver that does not read: %v, want %v", err, ErrStalled)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("gave up after %v", d)
	}
}
