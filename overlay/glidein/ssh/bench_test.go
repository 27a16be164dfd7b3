package ssh

import (
	"context"
	"fmt"
	"testing"

	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// BenchmarkSubmitCancel submits a glidein to one of four hosts (a real
// sshd each, on loopback) and cancels it: the site's own cost per
// glidein, SSH sessions included, the copy of the binary excepted.
//
//	go test -run '^$' -bench SubmitCancel ./overlay/glidein/ssh/
func BenchmarkSubmitCancel(b *testing.B) {
	srv := sshtest.Start(b, 4)
	s, err := New(Config{Hosts: srv.Hosts, User: srv.User, KeyFile: srv.KeyFile, KnownHosts: srv.KnownHosts, BaseDir: srv.Dir + "/base", Slots: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Submit(ctx, req("pond-warm", "exit 0")); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("pond-b%d", i)
		if _, err := s.Submit(ctx, req(id, "exec sleep 300")); err != nil {
			b.Fatal(err)
		}
		if err := s.Cancel(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
