package schedd

import (
	"context"
	"testing"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

// TestIdlePeekIsNoCycle checks that the pool policy's read of the idle
// autoclusters (Peek) is not taken for a cycle of the pool's negotiator,
// which would let the jobs flock sooner, while a negotiator's is.
func TestIdlePeekIsNoCycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := config.New(config.Options{Host: config.HostInfo{FullHostname: "submit.example.org", Hostname: "submit",
		IPAddress: "127.0.0.1", CPUs: 1, MemoryMB: 1024}})
	if err := cfg.ParseInto("test.cfg", []byte("UID_DOMAIN = example.org\n")); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, Options{Config: cfg, Name: "schedd@submit", Address: "submit.example.org:9618", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Idle(ctx, &wire.IdleRequest{Peek: true}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	peeked := s.fl.homeCycle
	s.mu.Unlock()
	if !peeked.IsZero() {
		t.Errorf("a peek recorded a negotiation cycle at %v", peeked)
	}
	if _, err := s.Idle(ctx, &wire.IdleRequest{}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	cycle := s.fl.homeCycle
	s.mu.Unlock()
	if cycle.IsZero() {
		t.Error("a negotiator's request recorded no cycle")
	}
}
