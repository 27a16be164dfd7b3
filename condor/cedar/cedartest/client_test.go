package cedartest_test

import (
	"context"
	"errors"
	"net"
	"os/user"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/cedar/cedartest"
)

// serve runs srv on a loopback listener until the test ends.
func serve(t *testing.T, srv *cedar.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(context.Background(), c, nil)
		}
	}()
	return ln.Addr().String()
}

// TestDialFS authenticates by FS as the test's own user, runs a command
// that echoes a string both ways over the sealed stream, and is denied a
// command its identity has no scope for.
func TestDialFS(t *testing.T) {
	const echo, admin = 7001, 7002
	srv := cedar.NewServer(cedar.Options{
		Methods: []cedar.Method{&cedar.FS{Domain: "test", Grant: func(uid uint32, name string) *auth.Claims {
			return &auth.Claims{Subject: name, Scopes: []auth.Scope{auth.Read}}
		}}},
		Commands: map[int]cedar.Command{
			echo: {Name: "ECHO", Need: []auth.Scope{auth.Read}, Serve: func(_ context.Context, req *cedar.Request) error {
				s, err := req.Stream.GetString()
				if err != nil {
					return err
				}
				if err := req.Stream.EndRead(); err != nil {
					return err
				}
				if err := req.Stream.PutString(req.Identity.User + ":" + s); err != nil {
					return err
				}
				return req.Stream.EndMessage()
			}},
			admin: {Name: "ADMIN", Need: []auth.Scope{auth.Administrator}, Serve: func(context.Context, *cedar.Request) error {
				return errors.New("must not run")
			}},
		},
	})
	addr := serve(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}

	st, sess, err := cedartest.Dial(ctx, addr, echo)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Conn().Close()
	if sess.User != me.Username+"@test" || sess.Sid == "" || !st.Encrypted() {
		t.Errorf("session %+v, encrypted %v", sess, st.Encrypted())
	}
	if err := st.PutString("hello"); err != nil {
		t.Fatal(err)
	}
	if err := st.EndMessage(); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetString()
	if err != nil {
		t.Fatal(err)
	}
	if got != me.Username+":hello" {
		t.Errorf("echo = %q", got)
	}

	st2, sess2, err := cedartest.Dial(ctx, addr, admin)
	if !errors.Is(err, cedartest.ErrDenied) || sess2 == nil || sess2.ReturnCode != "DENIED" {
		t.Fatalf("admin command: %v %+v", err, sess2)
	}
	st2.Conn().Close()
}
