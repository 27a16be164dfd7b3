package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"
	"time"
)

// TestNotSent: a call that failed before its request went out whole says
// so (ErrNotSent), and one that went out and got no answer, or an answer,
// does not: only the first may be sent again without doubt.
func TestNotSent(t *testing.T) {
	// Nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	// A server that takes the connection and closes it at once: a TLS
	// client's handshake fails before the request goes out.
	hangUp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hangUp.Close() })
	go func() {
		for {
			conn, err := hangUp.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()

	// A server that reads the whole request and then closes the
	// connection without an answer, and one that answers an error.
	taken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(taken.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)

	for _, tc := range []struct {
		name    string
		client  *Client
		notSent bool
		is      error
	}{
		{name: "nothing listens", client: NewClient(closed, ""), notSent: true, is: syscall.ECONNREFUSED},
		{name: "handshake cut", client: NewClient(hangUp.Addr().String(), "").WithTLS(&tls.Config{ServerName: "pond"}), notSent: true},
		{name: "taken, not answered", client: NewClient(taken.URL, "")},
		{name: "answered an error", client: NewClient(failing.URL, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := tc.client.Call(ctx, "startd/activate", map[string]string{"claim_id": "c1"}, nil)
			if err == nil {
				t.Fatal("the call succeeded")
			}
			if got := errors.Is(err, ErrNotSent); got != tc.notSent {
				t.Errorf("%v: ErrNotSent %v, want %v", err, got, tc.notSent)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("%v: does not wrap %v", err, tc.is)
			}
		})
	}
}

// TestWriteFailed: an error of the transport's write of a request (a
// pooled connection reset by the server as the request was flushed, after
// the trace had counted it written) is a request not sent whole; a read
// error, a timeout or an answer are not.
func TestWriteFailed(t *testing.T) {
	broken := func(op string, err error) error {
		return &url.Error{Op: "Post", URL: "https://127.0.0.1:1/x",
			Err: fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", &net.OpError{Op: op, Net: "tcp", Err: err})}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"write: broken pipe", broken("write", syscall.EPIPE), true},
		{"write: connection reset", broken("write", syscall.ECONNRESET), true},
		{"read: connection reset", broken("read", syscall.ECONNRESET), false},
		{"timeout", &url.Error{Op: "Post", URL: "https://127.0.0.1:1/x", Err: context.DeadlineExceeded}, false},
		{"EOF", &url.Error{Op: "Post", URL: "https://127.0.0.1:1/x", Err: io.EOF}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := writeFailed(tc.err); got != tc.want {
				t.Errorf("writeFailed(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
