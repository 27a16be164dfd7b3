package gossip

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
	"github.com/pond-htc/pond/overlay/api"
)

func TestParseLogLine(t *testing.T) {
	for _, tc := range []struct {
		in    string
		level slog.Level
		msg   string
	}{
		{"[DEBUG] memberlist: Stream connection", slog.LevelDebug, "memberlist: Stream connection"},
		{"[INFO] serf: EventMemberJoin: a 127.0.0.1", slog.LevelInfo, "serf: EventMemberJoin: a 127.0.0.1"},
		{"[WARN] memberlist: Refuting", slog.LevelWarn, "memberlist: Refuting"},
		{"[ERR] memberlist: Failed", slog.LevelError, "memberlist: Failed"},
		{"no level", slog.LevelInfo, "no level"},
		{"[", slog.LevelInfo, "["},
	} {
		level, msg := parseLogLine(tc.in)
		if level != tc.level || msg != tc.msg {
			t.Errorf("parseLogLine(%q) = %v %q", tc.in, level, msg)
		}
	}
}

func FuzzParseLogLine(f *testing.F) {
	f.Add("[DEBUG] memberlist: x")
	f.Add("[]")
	f.Fuzz(func(t *testing.T, s string) {
		_, msg := parseLogLine(s)
		if len(msg) > len(s) {
			t.Fatalf("message longer than line")
		}
	})
}

func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no name", Config{BindAddr: "127.0.0.1:0"}, "node name is empty"},
		{"bad profile", Config{NodeName: "a", Profile: "campus"}, `unknown gossip profile "campus"`},
		{"bad port", Config{NodeName: "a", BindAddr: "127.0.0.1:99999"}, "bad port"},
		{"bad key", Config{NodeName: "a", BindAddr: "127.0.0.1:0", EncryptKey: "abc"}, "encryption key"},
		{"unencrypted on all addresses", Config{NodeName: "a", BindAddr: "0.0.0.0:0"}, "bind address 0.0.0.0:0: gossip would be unencrypted"},
		{"unencrypted, empty host", Config{NodeName: "a", BindAddr: ":0"}, "pass it with -encrypt KEY"},
		{"negative move grace", Config{NodeName: "a", BindAddr: "127.0.0.1:0", MoveGrace: -time.Second}, "move grace -1s is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Start(ctx, tc.cfg)
			if err == nil {
				s.Shutdown()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
		})
	}
}

// TestInsecureGossip checks that unencrypted gossip on an address other
// hosts reach is refused unless allowed, and that encrypted gossip there
// and unencrypted gossip on loopback are not.
func TestInsecureGossip(t *testing.T) {
	ctx := context.Background()
	key, err := api.GossipKeyGen()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := Start(ctx, Config{NodeName: "a", BindAddr: "0.0.0.0:0", Profile: "fast"}); !errors.Is(err, ErrInsecure) {
		if err == nil {
			s.Shutdown()
		}
		t.Fatalf("unencrypted on 0.0.0.0: %v, want ErrInsecure", err)
	}
	for _, cfg := range []Config{
		{NodeName: "insecure", BindAddr: "0.0.0.0:0", Profile: "fast", Insecure: true},
		{NodeName: "encrypted", BindAddr: "0.0.0.0:0", Profile: "fast", EncryptKey: key},
		{NodeName: "loopback", BindAddr: "127.0.0.1:0", Profile: "fast"},
		{NodeName: "localhost", BindAddr: "localhost:0", Profile: "fast"},
	} {
		s, err := Start(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: %v", cfg.NodeName, err)
		}
		s.Shutdown()
	}
}

func TestJoinTagsAndKeyring(t *testing.T) {
	ctx := context.Background()
	key, _ := api.GossipKeyGen()
	dir := t.TempDir()
	start := func(name string) *Sea {
		s, err := Start(ctx, Config{NodeName: name, BindAddr: "127.0.0.1:0", Profile: "fast", EncryptKey: key,
			DataDir: filepath.Join(dir, name), Tags: map[string]string{api.TagVersion: ProtocolVersion, api.TagRole: api.RoleNode}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown() })
		return s
	}
	a, b := start("a"), start("b")
	events := a.Subscribe(16)
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := b.Join(jctx, []string{a.GossipAddr()}, 10*time.Millisecond); err != nil || n != 1 {
		t.Fatalf("join: %d, %v", n, err)
	}
	if err := a.SetTags(map[string]string{api.TagVersion: ProtocolVersion, api.TagRole: api.RoleCM}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ms := b.Members()
		if len(ms) == 2 && ms[0].Name == "a" && ms[0].Tags[api.TagRole] == api.RoleCM && ms[0].IsPond() && ms[0].GossipAddr() == a.GossipAddr() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's members: %+v", ms)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// a sees b join (possibly after its own tag update).
	joined := false
	for !joined {
		select {
		case ev := <-events:
			if me, ok := ev.(serf.MemberEvent); ok && me.Type == serf.EventMemberJoin {
				joined = true
			} else if !ok || me.Type != serf.EventMemberUpdate {
				t.Fatalf("event %v, want a member join or update", ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no member join event")
		}
	}
	if !a.Encrypted() {
		t.Error("not encrypted")
	}
	if _, err := os.Stat(filepath.Join(dir, "a", KeyringFile)); err != nil {
		t.Errorf("keyring file: %v", err)
	}
	// Joining nobody gives up when the context ends.
	c := start("c")
	short, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if _, err := c.Join(short, []string{"127.0.0.1:1"}, 10*time.Millisecond); err == nil {
		t.Error("join of a closed port succeeded")
	}
}

func TestProfiles(t *testing.T) {
	probe := map[string]time.Duration{}
	for _, name := range api.GossipProfiles {
		c, err := memberlistConfig(name)
		if err != nil {
			t.Fatalf("profile %q: %v", name, err)
		}
		probe[name] = c.ProbeTimeout
	}
	// From the most patient failure detector to the quickest.
	order := []string{"wan", "lan", "local", "fast"}
	for i := 1; i < len(order); i++ {
		if probe[order[i-1]] <= probe[order[i]] {
			t.Errorf("probe timeout of %s (%v) is not longer than that of %s (%v)", order[i-1], probe[order[i-1]], order[i], probe[order[i]])
		}
	}
	if c, _ := memberlistConfig(""); c.ProbeTimeout != probe["lan"] {
		t.Errorf("the default profile is not lan")
	}
}

func TestKeyringNeedsEncryption(t *testing.T) {
	s, err := Start(context.Background(), Config{NodeName: "plain", BindAddr: "127.0.0.1:0", Profile: "fast", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	key, _ := api.GossipKeyGen()
	for name, op := range map[string]func() (*api.KeyResult, error){
		"list":    s.ListKeys,
		"install": func() (*api.KeyResult, error) { return s.InstallKey(key) },
		"use":     func() (*api.KeyResult, error) { return s.UseKey(key) },
		"remove":  func() (*api.KeyResult, error) { return s.RemoveKey(key) },
	} {
		if _, err := op(); !errors.Is(err, ErrNotEncrypted) {
			t.Errorf("%s on an unencrypted sea: error %v, want ErrNotEncrypted", name, err)
		}
	}
}

// TestConfirmFailed checks ConfirmFailed on real members: an alive member's
// failure is not confirmed, one that stopped answering is once serf
// declared it failed, so is one the sea does not know, and nothing is once
// the context ends.
func TestConfirmFailed(t *testing.T) {
	ctx := context.Background()
	start := func(name string) *Sea {
		s, err := Start(ctx, Config{NodeName: name, BindAddr: "127.0.0.1:0", Profile: "fast"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown() })
		return s
	}
	a, b := start("a"), start("b")
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := b.Join(jctx, []string{a.GossipAddr()}, 10*time.Millisecond); err != nil || n != 1 {
		t.Fatalf("join: %d, %v", n, err)
	}
	begun := time.Now()
	if a.ConfirmFailed(ctx, "b") {
		t.Error("the failure of b, alive, was confirmed")
	}
	if waited := time.Since(begun); waited < 2*200*time.Millisecond {
		t.Errorf("ConfirmFailed decided after %s, before two probe intervals of the fast profile", waited)
	}
	if !a.ConfirmFailed(ctx, "nobody") {
		t.Error("the failure of a member the sea does not know was not confirmed")
	}

	// b stops answering, without leaving.
	b.Shutdown()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(a.Members(), func(m api.Member) bool { return m.Name == "b" && m.Status == "failed" }) {
		if time.Now().After(deadline) {
			t.Fatalf("a never saw b fail: %+v", a.Members())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !a.ConfirmFailed(ctx, "b") {
		t.Error("the failure of b, stopped, was not confirmed")
	}
	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	if a.ConfirmFailed(done, "b") {
		t.Error("ConfirmFailed confirmed after its context ended")
	}
}

// TestMoveGrace: a node that showed it moves (TagMoving) and then failed
// without coming back is waited for the sea's MoveGrace, and no longer;
// a sea configured without one waits DefaultMoveGrace.
func TestMoveGrace(t *testing.T) {
	ctx := context.Background()
	const grace = 500 * time.Millisecond
	start := func(cfg Config) *Sea {
		cfg.BindAddr, cfg.Profile = "127.0.0.1:0", "fast"
		s, err := Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown() })
		return s
	}
	a := start(Config{NodeName: "a", MoveGrace: grace})
	if got := a.MoveGrace(); got != grace {
		t.Errorf("MoveGrace() = %v, want the configured %v", got, grace)
	}
	if got := start(Config{NodeName: "d"}).MoveGrace(); got != DefaultMoveGrace {
		t.Errorf("MoveGrace() of a sea configured without one = %v, want %v", got, DefaultMoveGrace)
	}
	w := start(Config{NodeName: "w", Tags: map[string]string{api.TagMoving: "127.0.0.1:1"}})
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := w.Join(jctx, []string{a.GossipAddr()}, 10*time.Millisecond); err != nil || n != 1 {
		t.Fatalf("join: %d, %v", n, err)
	}
	// w stops answering, and never comes back at the address it showed.
	w.Shutdown()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(a.Members(), func(m api.Member) bool { return m.Name == "w" && m.Status == "failed" }) {
		if time.Now().After(deadline) {
			t.Fatalf("a never saw w fail: %+v", a.Members())
		}
		time.Sleep(50 * time.Millisecond)
	}
	begun := time.Now()
	if a.WaitMoved(ctx, "w") {
		t.Error("WaitMoved: w, stopped, came back")
	}
	if waited := time.Since(begun); waited < grace || waited > grace+5*time.Second {
		t.Errorf("WaitMoved gave w up after %v, want its sea's MoveGrace, %v", waited, grace)
	}
}

// TestSetTagsAfterLeave keeps setting a node's tags while it leaves a sea
// of four and after the others' gossip made memberlist reap it
// (GossipToTheDeadTime, 2 s in the fast profile): serf is handed no update
// then, where memberlist would panic on one.
func TestSetTagsAfterLeave(t *testing.T) {
	ctx := context.Background()
	var seas []*Sea
	for _, name := range []string{"a", "b", "c", "d"} {
		s, err := Start(ctx, Config{NodeName: name, BindAddr: "127.0.0.1:0", Profile: "fast"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown() })
		seas = append(seas, s)
	}
	for _, s := range seas[1:] {
		if _, err := s.Join(ctx, []string{seas[0].GossipAddr()}, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	a := seas[0]
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if err := a.SetTags(map[string]string{"n": strconv.Itoa(i)}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	if err := a.Leave(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	close(stop)
	<-done
}

// TestMove moves a node of a sea of three to another gossip address: the
// others see it alive at the new one, every leave or failure of it they
// saw came with TagMoving (so none takes it for lost), WaitMoved says it
// came back, and the tag goes once it has joined again. The node keeps
// its name, tags and subscriptions, and does not shut down.
func TestMove(t *testing.T) {
	ctx := context.Background()
	start := func(name string) *Sea {
		s, err := Start(ctx, Config{NodeName: name, BindAddr: "127.0.0.1:0", Profile: "fast", DataDir: t.TempDir(),
			Tags: map[string]string{"n": name}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown() })
		return s
	}
	a, b, w := start("a"), start("b"), start("w")
	events := a.Subscribe(256)
	wEvents := w.Subscribe(256)
	for _, s := range []*Sea{b, w} {
		if _, err := s.Join(ctx, []string{a.GossipAddr()}, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	// at reports how s sees w: its status, address and tags.
	at := func(s *Sea) api.Member {
		for _, m := range s.Members() {
			if m.Name == "w" {
				return m
			}
		}
		return api.Member{}
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: a sees w as %+v, b as %+v", what, at(a), at(b))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitUntil("a and b to see w", func() bool { return at(a).Status == api.StatusAlive && at(b).Status == api.StatusAlive })
	if err := w.SetTags(map[string]string{"n": "w", "api": "x"}); err != nil {
		t.Fatal(err)
	}
	from := w.GossipAddr()
	to := freeGossipAddr(t)
	mctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := w.Move(mctx, to, nil); err != nil {
		t.Fatal(err)
	}
	if w.GossipAddr() != to || w.LocalMember().Name != "w" {
		t.Fatalf("w after its move: %s at %s, want w at %s", w.LocalMember().Name, w.GossipAddr(), to)
	}
	select {
	case <-w.ShutdownCh():
		t.Fatal("w's ShutdownCh closed by its move")
	default:
	}
	for _, s := range []*Sea{a, b} {
		waitUntil("w alive at its new address", func() bool {
			m := at(s)
			return m.Status == api.StatusAlive && m.GossipAddr() == to && m.Tags["api"] == "x"
		})
	}
	if !a.WaitMoved(ctx, "w") {
		t.Error("WaitMoved: w did not come back")
	}
	waitUntil("w's move tag to go", func() bool { _, ok := at(a).Tags[api.TagMoving]; return !ok })
	// w still hears of the others through its subscription.
	waitUntil("w to see a and b again", func() bool {
		n := 0
		for _, m := range w.Members() {
			if m.Status == api.StatusAlive {
				n++
			}
		}
		return n == 3
	})
	if len(wEvents) == 0 {
		t.Error("w's subscription got no event since its move")
	}
	// It stays at its new address: no flapping.
	time.Sleep(2 * time.Second)
	if m := at(a); m.Status != api.StatusAlive || m.GossipAddr() != to {
		t.Errorf("a sees w as %+v two seconds after its move, want alive at %s", m, to)
	}
	// a sees w leave its old address, showing where it goes. A machine
	// starved of CPU may keep a from hearing the leave before its probe of
	// the old address fails: a failure that shows the move is what
	// WaitMoved waits out, and is logged; one that does not is an error.
	var left, failedMoving bool
	for len(events) > 0 {
		ev := <-events
		me, ok := ev.(serf.MemberEvent)
		if !ok {
			continue
		}
		for _, m := range me.Members {
			if m.Name != "w" {
				continue
			}
			switch me.Type {
			case serf.EventMemberFailed:
				if m.Tags[api.TagMoving] != to {
					t.Errorf("a saw w fail (tags %v) while it moved from %s to %s", m.Tags, from, to)
				}
				failedMoving = true
				t.Logf("a saw w fail while it moved from %s to %s, before w's leave reached it", from, to)
			case serf.EventMemberLeave:
				left = true
				if m.Tags[api.TagMoving] != to {
					t.Errorf("a saw w leave with tags %v, want %s=%s", m.Tags, api.TagMoving, to)
				}
			}
		}
	}
	if !left && !failedMoving {
		t.Error("a never saw w leave its old address")
	}
}

// mutedTransport is a memberlist transport whose packets (UDP: gossip,
// probes and their broadcasts) are lost once muted is set; its streams
// (TCP: push-pulls) still go through.
type mutedTransport struct {
	*memberlist.NetTransport
	muted atomic.Bool
}

func (t *mutedTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.muted.Load() {
		return time.Now(), nil
	}
	return t.NetTransport.WriteTo(b, addr)
}

func (t *mutedTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.muted.Load() {
		return time.Now(), nil
	}
	return t.NetTransport.WriteToAddress(b, a)
}

// TestLeaveSeenWithoutItsGossip has b leave a sea of two while every
// packet it sends is lost, its leave intent among them: what a member sees
// when it ignored the intent because a push-pull with b, carrying the
// intent's Lamport time, reached it first. a must still see b left, not
// failed: b tells it over TCP once it has left.
func TestLeaveSeenWithoutItsGossip(t *testing.T) {
	ctx := context.Background()
	a, err := Start(ctx, Config{NodeName: "a", BindAddr: "127.0.0.1:0", Profile: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown() })
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"},
		Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	tr := &mutedTransport{NetTransport: nt}
	b, err := Start(ctx, Config{NodeName: "b", AdvertiseAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(nt.GetAutoBindPort())),
		Transport: tr, Profile: "fast"})
	if err != nil {
		nt.Shutdown()
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown() })
	if _, err := b.Join(ctx, []string{a.GossipAddr()}, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	status := func() string {
		for _, m := range a.Members() {
			if m.Name == "b" {
				return m.Status
			}
		}
		return ""
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for status() != want {
			if time.Now().After(deadline) {
				t.Fatalf("a sees b %q, want %q", status(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor(api.StatusAlive)
	tr.muted.Store(true)
	if err := b.Leave(); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	waitFor(api.StatusLeft)
	// It stays left once a's probes of b have failed.
	time.Sleep(time.Second)
	if got := status(); got != api.StatusLeft {
		t.Fatalf("a sees b %q a second after its leave, want %q", got, api.StatusLeft)
	}
}

// freeGossipAddr is 127.0.0.1:PORT with PORT free for TCP and UDP.
func freeGossipAddr(t *testing.T) string {
	t.Helper()
	for range 10 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err == nil {
			u.Close()
			return addr
		}
	}
	t.Fatal("no port free for TCP and UDP")
	return ""
}
