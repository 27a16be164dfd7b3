package cedartest_test

import (
	"context"
	"errors"
	"os/user"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/cedar/cedartest"
)

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
	addr := cedartest.Serve(t, srv)
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

// TestSessionCommand checks how long a command may run: one without a
// Session of its own ends at the server's Timeout from the connection's
// start however busy its client; one with a Session outlives Timeout as
// long as each message arrives within Request.Idle, its context
// unexpired, and is cut when its client idles longer than that.
func TestSessionCommand(t *testing.T) {
	const plain, long = 7101, 7102
	const timeout = time.Second
	ctxErr := make(chan error, 2)
	echo := func(session bool) func(context.Context, *cedar.Request) error {
		return func(ctx context.Context, req *cedar.Request) error {
			for {
				if session {
					_ = req.Stream.SetDeadline(time.Now().Add(req.Idle))
				}
				s, err := req.Stream.GetString()
				if err != nil {
					ctxErr <- ctx.Err()
					return err
				}
				if err := req.Stream.EndRead(); err != nil {
					return err
				}
				if err := req.Stream.PutString(s); err != nil {
					return err
				}
				if err := req.Stream.EndMessage(); err != nil {
					return err
				}
			}
		}
	}
	srv := cedar.NewServer(cedar.Options{
		Methods: []cedar.Method{&cedar.FS{Grant: func(uint32, string) *auth.Claims {
			return &auth.Claims{Scopes: []auth.Scope{auth.Read}}
		}}},
		Commands: map[int]cedar.Command{
			plain: {Name: "PLAIN", Need: []auth.Scope{auth.Read}, Serve: echo(false)},
			long:  {Name: "LONG", Need: []auth.Scope{auth.Read}, Serve: echo(true), Session: time.Minute},
		},
		Timeout: timeout,
	})
	addr := cedartest.Serve(t, srv)
	ctx := context.Background()
	// talk sends a message every gap for total, or until one is not
	// answered, and says whether all were.
	talk := func(st *cedar.Stream, gap, total time.Duration) bool {
		for start := time.Now(); time.Since(start) < total; {
			_ = st.SetDeadline(time.Now().Add(5 * time.Second))
			if st.PutString("ping") != nil || st.EndMessage() != nil {
				return false
			}
			if _, err := st.GetString(); err != nil {
				return false
			}
			if st.EndRead() != nil {
				return false
			}
			time.Sleep(gap)
		}
		return true
	}
	for _, tc := range []struct {
		name    string
		command int
		gap     time.Duration
		answers bool // every message of twice the timeout answered
	}{
		{"without a session, cut at Timeout", plain, timeout / 8, false},
		{"with a session, past Timeout", long, timeout / 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, err := cedartest.Dial(ctx, addr, tc.command)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Conn().Close()
			if got := talk(st, tc.gap, 2*timeout); got != tc.answers {
				t.Errorf("every message over twice the timeout answered: %v, want %v", got, tc.answers)
			}
			if tc.answers {
				// An idle client is cut after Idle.
				time.Sleep(timeout + 200*time.Millisecond)
				if talk(st, 0, time.Millisecond) {
					t.Error("a client idle past Request.Idle is still served")
				}
				if err := <-ctxErr; err != nil {
					t.Errorf("the session's context ended at the idle cut: %v", err)
				}
			} else {
				<-ctxErr
			}
		})
	}
}
