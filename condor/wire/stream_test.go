package wire_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

type countReq struct {
	N       int    `json:"n"`
	FailAt  int    `json:"fail_at"` // fail before item FailAt (1-based); 0: never
	Message string `json:"message"`
}

type item struct {
	I int `json:"i"`
}

// streamServer serves count: N items, then an error at FailAt if set; its
// item 1 comes at once, the rest only once release is closed.
func streamServer(t *testing.T, release chan struct{}) *wire.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(wire.PathPrefix+"test/count", wire.HandleStream(func(ctx context.Context, in *countReq, emit func(item) error) error {
		for i := 1; i <= in.N; i++ {
			if i == in.FailAt {
				return fmt.Errorf("%w: %s", wire.ErrNotFound, in.Message)
			}
			if i == 2 && release != nil {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if err := emit(item{I: i}); err != nil {
				return err
			}
		}
		return nil
	}))
	// A server that sends half a stream and hangs up.
	mux.HandleFunc(wire.PathPrefix+"test/cut", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"item":{"i":1}}`+"\n"+`{"item":{"i":2}}`+"\n")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return wire.NewClient(srv.Listener.Addr().String(), "")
}

func collect(ctx context.Context, c *wire.Client, path string, req *countReq) ([]int, error) {
	var got []int
	err := c.CallStream(ctx, path, req, func(r io.Reader) error {
		return wire.ReadStream(r, func(it item) error { got = append(got, it.I); return nil })
	})
	return got, err
}

func TestStream(t *testing.T) {
	ctx := context.Background()
	c := streamServer(t, nil)
	for _, tc := range []struct {
		name    string
		path    string
		req     countReq
		want    int
		wantErr string
		status  int
	}{
		{name: "none", path: "test/count", req: countReq{N: 0}, want: 0},
		{name: "many", path: "test/count", req: countReq{N: 20000}, want: 20000},
		{name: "error before the first", path: "test/count", req: countReq{N: 5, FailAt: 1, Message: "no such thing"}, wantErr: "no such thing", status: http.StatusNotFound},
		{name: "error after some", path: "test/count", req: countReq{N: 5, FailAt: 4, Message: "disk on fire"}, want: 3, wantErr: "after 3 items: not found: disk on fire", status: http.StatusInternalServerError},
		{name: "cut short", path: "test/cut", want: 2, wantErr: "cut short after 2 items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := collect(ctx, c, tc.path, &tc.req)
			if len(got) != tc.want {
				t.Errorf("got %d items, want %d", len(got), tc.want)
			}
			for i, v := range got {
				if v != i+1 {
					t.Fatalf("item %d is %d", i, v)
				}
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			}
			var we *wire.Error
			if tc.status != 0 && (!errors.As(err, &we) || we.Status != tc.status) {
				t.Errorf("error %v, want HTTP status %d", err, tc.status)
			}
			if tc.path == "test/cut" && !errors.Is(err, wire.ErrCutShort) {
				t.Errorf("error %v does not wrap ErrCutShort", err)
			}
		})
	}
}

// TestStreamFirstItemAtOnce: the first item reaches the reader while the
// server is still producing the next.
func TestStreamFirstItemAtOnce(t *testing.T) {
	release := make(chan struct{})
	c := streamServer(t, release)
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	first := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		done <- c.CallStream(context.Background(), "test/count", &countReq{N: 3}, func(r io.Reader) error {
			return wire.ReadStream(r, func(it item) error {
				if it.I == 1 {
					first <- it.I
				}
				return nil
			})
		})
	}()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the first item did not arrive while the server held the second")
	}
	once.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
