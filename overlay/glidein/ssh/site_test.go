package ssh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// shell is the glidein binary of the tests: a real ELF executable of
// this machine, copied to the hosts like pondctl, told what to do by
// its arguments.
const shell = "/bin/sh"

func newSite(t *testing.T, srv *sshtest.Servers, mod func(*Config)) *Site {
	t.Helper()
	cfg := Config{
		Hosts:          srv.Hosts,
		User:           srv.User,
		KeyFile:        srv.KeyFile,
		KnownHosts:     srv.KnownHosts,
		BaseDir:        filepath.Join(srv.Dir, "base"),
		Slots:          1,
		ConnectTimeout: 5 * time.Second,
		KillGrace:      2 * time.Second,
		// What a test that dies without its cleanups leaves ends soon.
		DefaultLifetime: 5 * time.Minute,
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// req is a glidein running script with sh.
func req(id, script string) glidein.Request {
	return glidein.Request{ID: id, Binary: shell, Args: []string{"-c", script}}
}

func find(gs []glidein.Glidein, id string) (glidein.Glidein, bool) {
	for _, g := range gs {
		if g.ID == id {
			return g, true
		}
	}
	return glidein.Glidein{}, false
}

// waitState lists until the glidein id is in state want.
func waitState(t *testing.T, s *Site, id string, want glidein.State) glidein.Glidein {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last glidein.Glidein
	for time.Now().Before(deadline) {
		gs, err := s.List(context.Background(), glidein.IDPrefix)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		g, ok := find(gs, id)
		if ok && g.State == want {
			return g
		}
		last = g
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: state %q (%s), want %q", id, last.State, last.Reason, want)
	return last
}

// sessionProcs returns the live processes of session sid.
func sessionProcs(t *testing.T, sid int) []proc {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var ps []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
		if s, _ := strconv.Atoi(f[3]); s == sid && f[0] != "Z" {
			ps = append(ps, proc{PID: pid, SID: sid, State: f[0]})
		}
	}
	return ps
}

func sidOf(t *testing.T, g glidein.Glidein) int {
	t.Helper()
	i := strings.LastIndexByte(g.SiteID, ':')
	sid, err := strconv.Atoi(g.SiteID[i+1:])
	if err != nil {
		t.Fatalf("site id %q: %v", g.SiteID, err)
	}
	return sid
}

// TestSubmitListCancel starts glideins on two hosts of one slot each,
// checks what they were given and how, lists them, and cancels them.
func TestSubmitListCancel(t *testing.T) {
	srv := sshtest.Start(t, 2)
	s := newSite(t, srv, nil)
	ctx := context.Background()
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	const token = "s3cret-token-value"
	var gs []glidein.Glidein
	for _, id := range []string{"pond-a", "pond-b"} {
		r := req(id, `printf '%s %s\n' "$GREETING" "$1" > "$1/out"; exec sleep 300`)
		r.Args = append(r.Args, "glidein", "{dir}")
		r.Env = map[string]string{"GREETING": "hello 'world'"}
		r.Files = map[string][]byte{"token": []byte(token)}
		r.Lifetime = time.Hour
		g, err := s.Submit(ctx, r)
		if err != nil {
			t.Fatalf("Submit %s: %v", id, err)
		}
		if g.State != glidein.Running || g.SiteID == "" || g.Host == "" {
			t.Fatalf("Submit %s: %+v", id, g)
		}
		gs = append(gs, g)
	}
	if gs[0].Host == gs[1].Host {
		t.Fatalf("both glideins on %s, with one slot per host", gs[0].Host)
	}
	if _, err := s.Submit(ctx, req("pond-c", "exit 0")); !errors.Is(err, ErrFull) {
		t.Fatalf("third Submit on two full hosts: %v, want ErrFull", err)
	}

	listed, err := s.List(ctx, glidein.IDPrefix)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(listed) != 2 {
		t.Fatalf("List: %+v, want 2 glideins", listed)
	}
	for i, g := range gs {
		l := listed[i]
		if l.ID != g.ID || l.State != glidein.Running || l.Host != g.Host || l.SiteID != g.SiteID || l.Submitted.IsZero() || l.Started.IsZero() {
			t.Errorf("List[%d] = %+v, Submit gave %+v", i, l, g)
		}
		dir := filepath.Join(srv.Dir, "base", "hosts", hostKey(g.Host), g.ID)
		waitFile(t, filepath.Join(dir, "out"))
		out, _ := os.ReadFile(filepath.Join(dir, "out"))
		if want := "hello 'world' " + dir + "\n"; string(out) != want {
			t.Errorf("%s wrote %q, want %q (Env and {dir})", g.ID, out, want)
		}
		for name, mode := range map[string]os.FileMode{"": 0o700, "token": 0o600, envFile: 0o600, markerFile: 0o600} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != mode {
				t.Errorf("%s/%s: mode %v, want %v", g.ID, name, fi.Mode().Perm(), mode)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "token")); string(b) != token {
			t.Errorf("token: %q", b)
		}
		// The token is on no command line of the glidein's processes.
		for _, p := range sessionProcs(t, sidOf(t, g)) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
			if bytes.Contains(cmdline, []byte(token)) {
				t.Errorf("process %d has the token on its command line: %q", p.PID, cmdline)
			}
		}
	}
	if got, err := s.List(ctx, "pond-b"); err != nil || len(got) != 1 || got[0].ID != "pond-b" {
		t.Errorf("List(pond-b) = %+v, %v", got, err)
	}
	if got, err := s.List(ctx, "other-"); err != nil || len(got) != 0 {
		t.Errorf("List(other-) = %+v, %v", got, err)
	}

	// The site thinks the first is on the other host: Cancel finds it
	// all the same.
	s.mu.Lock()
	s.where[gs[0].ID] = gs[1].Host
	s.mu.Unlock()
	for _, g := range gs {
		if err := s.Cancel(ctx, g.ID); err != nil {
			t.Fatalf("Cancel %s: %v", g.ID, err)
		}
		if ps := sessionProcs(t, sidOf(t, g)); len(ps) != 0 {
			t.Errorf("after Cancel %s: processes %+v remain", g.ID, ps)
		}
		if _, err := os.Stat(filepath.Join(srv.Dir, "base", "hosts", hostKey(g.Host), g.ID)); !os.IsNotExist(err) {
			t.Errorf("after Cancel %s: its directory remains (%v)", g.ID, err)
		}
	}
	if listed, err := s.List(ctx, glidein.IDPrefix); err != nil || len(listed) != 0 {
		t.Errorf("List after Cancel: %+v, %v", listed, err)
	}
	if pids, _ := srv.Processes(); len(pids) != 0 {
		t.Errorf("processes left on the hosts: %v", pids)
	}
	for _, id := range []string{"pond-a", "pond-never"} {
		if err := s.Cancel(ctx, id); err != nil {
			t.Errorf("Cancel of %s, gone or unknown: %v", id, err)
		}
	}
	// The binary was copied once per host, under its checksum.
	bins, _ := filepath.Glob(filepath.Join(srv.Dir, "base", "bin", "*"))
	if len(bins) != 1 || filepath.Base(bins[0]) != "pondctl-"+sum(t, shell) {
		t.Errorf("binaries on the hosts: %v", bins)
	}
}

func sum(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	for range 200 {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s was not written", path)
}

// TestEnds shows how a glidein that ended is reported: by itself, with
// an error, at its lifetime, killed on the host.
func TestEnds(t *testing.T) {
	srv := sshtest.Start(t, 1)
	s := newSite(t, srv, func(c *Config) { c.Slots = 10; c.KillGrace = time.Second })
	ctx := context.Background()
	tests := []struct {
		name     string
		script   string
		lifetime time.Duration
		// kill, when set, is done on the glidein's session once it runs.
		kill   func(t *testing.T, sid int)
		want   glidein.State
		reason string
	}{
		{name: "done", script: "exit 0", want: glidein.Done, reason: "exited with status 0"},
		{name: "failed", script: "exit 3", want: glidein.Failed, reason: "exited with status 3"},
		{name: "lifetime", script: "exec sleep 300", lifetime: time.Second, want: glidein.Failed, reason: "killed at the end of its lifetime (1s)"},
		{name: "lifetime-ignores-term", script: "trap '' TERM; sleep 300", lifetime: time.Second, want: glidein.Failed, reason: "killed at the end of its lifetime (1s)"},
		{name: "killed-agent", script: "exec sleep 300", want: glidein.Cancelled, reason: "killed by SIGKILL on the host",
			kill: func(t *testing.T, sid int) { killComm(t, sid, "sleep") }},
		{name: "killed-session", script: "exec sleep 300", want: glidein.Cancelled, reason: "its processes ended without recording an exit status: killed on the host",
			kill: func(t *testing.T, sid int) {
				for _, p := range sessionProcs(t, sid) {
					_ = syscall.Kill(p.PID, syscall.SIGKILL)
				}
			}},
		{name: "crashed", script: "kill -SEGV $$", want: glidein.Failed, reason: "killed by SIGSEGV"},
		// A glidein whose validation failed: why, from its status file,
		// without the control characters it holds (raw or escaped).
		{name: "validation", script: status("glidein.status", "pond-validation", "validation",
			`validation failed: check disk: \u001b[31m1 MB free\r\nwant 2 MB\u202e`) + "; exit 3",
			want: glidein.Failed, reason: "exited with status 3: validation failed: check disk: [31m1 MB free want 2 MB"},
		{name: "validation-factory", script: "mkdir data && " + status("data/glidein.status", "pond-validation-factory", "validation",
			"validation failed: check memory: 1 GiB, want 4 GiB") + "; exit 3",
			want: glidein.Failed, reason: "exited with status 3: validation failed: check memory: 1 GiB, want 4 GiB"},
		{name: "validation-long", script: `m=$(head -c 5000 /dev/zero | tr '\0' x); ` + status("glidein.status", "pond-validation-long", "validation", "$m") + "; exit 3",
			want: glidein.Failed, reason: "exited with status 3: " + strings.Repeat("x", glidein.MaxMessage-len("…")) + "…"},
		// Too big to be read whole, another glidein's, not a validation,
		// not written: the exit status alone.
		{name: "validation-huge", script: `m=$(head -c 70000 /dev/zero | tr '\0' x); ` + status("glidein.status", "pond-validation-huge", "validation", "$m") + "; exit 3",
			want: glidein.Failed, reason: "exited with status 3"},
		{name: "validation-other", script: status("glidein.status", "pond-other", "validation", "validation failed: check disk: full") + "; exit 3",
			want: glidein.Failed, reason: "exited with status 3"},
		{name: "error", script: status("glidein.status", "pond-error", "error", "validation failed: check disk: full") + "; exit 1",
			want: glidein.Failed, reason: "exited with status 1"},
		{name: "validation-no-status", script: "exit 3", want: glidein.Failed, reason: "exited with status 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := req("pond-"+tt.name, tt.script)
			r.Lifetime = tt.lifetime
			g, err := s.Submit(ctx, r)
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if tt.kill != nil {
				waitState(t, s, g.ID, glidein.Running)
				tt.kill(t, sidOf(t, g))
			}
			got := waitState(t, s, g.ID, tt.want)
			if got.Reason != tt.reason {
				t.Errorf("reason %q, want %q", got.Reason, tt.reason)
			}
			if got.Ended.IsZero() != (tt.name == "killed-session") {
				t.Errorf("ended %v", got.Ended)
			}
			if err := s.Cancel(ctx, g.ID); err != nil {
				t.Errorf("Cancel: %v", err)
			}
		})
	}
}

// status is a shell command that writes a glidein's status file at path,
// with a newline between its fields as a raw control character; message
// is put between double quotes as it is (the shell expands it).
func status(path, id, reason, message string) string {
	return fmt.Sprintf(`printf '{"id":"%s",\n"phase":"failed",\n"reason":"%s",\n"message":"%%s"}\n' "%s" > %s`, id, reason, message, path)
}

// killComm kills with KILL the process of session sid whose command is
// comm, once it runs.
func killComm(t *testing.T, sid int, comm string) {
	t.Helper()
	for range 100 {
		for _, p := range sessionProcs(t, sid) {
			c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.PID))
			if strings.TrimSpace(string(c)) == comm {
				if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s in session %d", comm, sid)
}

// TestDuplicate: an ID a host has, running or ended, is refused, and
// nothing more is started.
func TestDuplicate(t *testing.T) {
	srv := sshtest.Start(t, 2)
	s := newSite(t, srv, nil)
	ctx := context.Background()
	for _, tt := range []struct{ id, script string }{
		{"pond-running", "exec sleep 300"},
		{"pond-ended", "exit 0"},
	} {
		if _, err := s.Submit(ctx, req(tt.id, tt.script)); err != nil {
			t.Fatalf("Submit %s: %v", tt.id, err)
		}
		// The other host has a free slot: the ID is still refused.
		if _, err := s.Submit(ctx, req(tt.id, tt.script)); !errors.Is(err, glidein.ErrDuplicate) {
			t.Errorf("second Submit %s: %v, want ErrDuplicate", tt.id, err)
		}
	}
	gs, err := s.List(ctx, glidein.IDPrefix)
	if err != nil || len(gs) != 2 {
		t.Fatalf("List: %+v, %v", gs, err)
	}
}

// TestConcurrentSubmits fills the hosts' slots from many goroutines: no
// host takes more than its slots.
func TestConcurrentSubmits(t *testing.T) {
	srv := sshtest.Start(t, 2)
	s := newSite(t, srv, func(c *Config) { c.Slots = 2 })
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = s.Submit(ctx, req(fmt.Sprintf("pond-c%d", i), "exec sleep 300"))
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrFull):
			t.Errorf("Submit: %v", err)
		}
	}
	gs, err := s.List(ctx, glidein.IDPrefix)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, g := range gs {
		per[g.Host]++
	}
	if ok != 4 || len(gs) != 4 || per[srv.Hosts[0]] != 2 || per[srv.Hosts[1]] != 2 {
		t.Errorf("%d submitted, listed per host %v, want 2 on each", ok, per)
	}
}

// TestAdopt: a caller that died after Submit started the glidein, before
// it recorded the result, finds it with a new site's List; so does one
// whose submission was cut before the glidein started.
func TestAdopt(t *testing.T) {
	srv := sshtest.Start(t, 2)
	ctx := context.Background()
	first := newSite(t, srv, nil)
	if _, err := first.Submit(ctx, req("pond-lost", "exec sleep 300")); err != nil {
		t.Fatal(err)
	}
	first.Close()

	// A submission cut after its directory was made, long ago.
	s := newSite(t, srv, nil)
	h := s.hosts[1]
	old := marker{ID: "pond-cut", Host: h.addr, Submitted: time.Now().Add(-time.Hour), Lifetime: time.Hour, Binary: sum(t, shell)}
	if _, err := s.run(ctx, h, "create", createScript, nil, s.cfg.BaseDir, h.key, old.ID, string(formatMarker(old))); err != nil {
		t.Fatal(err)
	}
	// And one cut before its marker was written, long ago, and one
	// being made.
	for _, id := range []string{"pond-nomarker", "pond-making"} {
		if err := os.MkdirAll(filepath.Join(srv.Dir, "base", "hosts", h.key, id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// And one whose marker is damaged.
	bad := filepath.Join(srv.Dir, "base", "hosts", h.key, "pond-damaged")
	if err := os.MkdirAll(bad, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, markerFile), []byte("\x00garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(srv.Dir, "base", "hosts", h.key, "pond-nomarker"), hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}

	gs, err := s.List(ctx, glidein.IDPrefix)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]glidein.State{"pond-lost": glidein.Running, "pond-cut": glidein.Failed, "pond-nomarker": glidein.Failed, "pond-making": glidein.Queued, "pond-damaged": glidein.Failed}
	if len(gs) != len(want) {
		t.Fatalf("List: %+v", gs)
	}
	for _, g := range gs {
		if g.State != want[g.ID] {
			t.Errorf("%s: %s (%s), want %s", g.ID, g.State, g.Reason, want[g.ID])
		}
		if err := s.Cancel(ctx, g.ID); err != nil {
			t.Errorf("Cancel %s: %v", g.ID, err)
		}
	}
	if gs, err := s.List(ctx, glidein.IDPrefix); err != nil || len(gs) != 0 {
		t.Errorf("List after Cancel: %+v, %v", gs, err)
	}
	if pids, _ := srv.Processes(); len(pids) != 0 {
		t.Errorf("processes left: %v", pids)
	}
}

// elfHeader returns the header of an ELF executable for machine.
func elfHeader(machine elf.Machine, data elf.Data) []byte {
	var order binary.ByteOrder = binary.LittleEndian
	if data == elf.ELFDATA2MSB {
		order = binary.BigEndian
	}
	h := elf.Header64{
		Ident:   [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(data), byte(elf.EV_CURRENT)},
		Type:    uint16(elf.ET_EXEC),
		Machine: uint16(machine),
		Version: uint32(elf.EV_CURRENT),
		Ehsize:  64,
	}
	var b bytes.Buffer
	_ = binary.Write(&b, order, h)
	return b.Bytes()
}

// TestArchitecture: a binary of another architecture is refused by
// Submit and by Check, naming the hosts, and nothing is left on them.
func TestArchitecture(t *testing.T) {
	srv := sshtest.Start(t, 2)
	arm := filepath.Join(t.TempDir(), "pondctl-arm64")
	if err := os.WriteFile(arm, elfHeader(elf.EM_AARCH64, elf.ELFDATA2LSB), 0o755); err != nil {
		t.Fatal(err)
	}
	s := newSite(t, srv, func(c *Config) { c.Binary = arm })
	ctx := context.Background()
	r := req("pond-arm", "exit 0")
	r.Binary = arm
	_, err := s.Submit(ctx, r)
	if !errors.Is(err, ErrArchitecture) {
		t.Fatalf("Submit: %v, want ErrArchitecture", err)
	}
	err = s.Check(ctx)
	for _, want := range append([]string{"linux/arm64", "x86_64"}, srv.Hosts...) {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check: %v, want it to name %s", err, want)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(srv.Dir, "base", "hosts", "*", "*")); len(entries) != 0 {
		t.Errorf("left on the hosts: %v", entries)
	}
	if bins, _ := filepath.Glob(filepath.Join(srv.Dir, "base", "bin", "*")); len(bins) != 0 {
		t.Errorf("binaries copied: %v", bins)
	}
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.Binary = notELF
	if _, err := s.Submit(ctx, r); err == nil || !strings.Contains(err.Error(), "not an ELF executable") {
		t.Errorf("Submit of a script: %v", err)
	}
}

// TestConnectErrors: an unknown host, a changed host key, a rejected
// user key and an unreachable host each give their error, naming the
// host, from Check, Submit and List.
func TestConnectErrors(t *testing.T) {
	srv := sshtest.Start(t, 3)
	dir := t.TempDir()
	otherKey := filepath.Join(dir, "other_key")
	sshtest.GenerateKey(t, otherKey)
	known, err := os.ReadFile(srv.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(known)), "\n")
	// host 0 as known; host 1 with host 2's key; host 2 missing.
	swapped := strings.Fields(lines[1])[0] + " " + strings.Join(strings.Fields(lines[2])[1:], " ")
	mixed := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(mixed, []byte(lines[0]+"\n"+swapped+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		host int
		mod  func(*Config)
		want error
	}{
		{"unknown host", 2, func(c *Config) { c.KnownHosts = mixed }, ErrUnknownHost},
		{"host key changed", 1, func(c *Config) { c.KnownHosts = mixed }, ErrHostKeyChanged},
		{"key rejected", 0, func(c *Config) { c.KeyFile = otherKey }, ErrKeyRejected},
		{"unreachable", 0, func(c *Config) { c.Hosts = []string{"127.0.0.1:1"} }, ErrUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t, srv, func(c *Config) {
				tt.mod(c)
				if len(c.Hosts) == len(srv.Hosts) {
					c.Hosts = []string{srv.Hosts[tt.host]}
				}
			})
			name := s.hosts[0].addr
			ctx := context.Background()
			err := s.Check(ctx)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), name) {
				t.Errorf("Check: %v, want %v naming %s", err, tt.want, name)
			}
			_, err = s.List(ctx, glidein.IDPrefix)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), name) {
				t.Errorf("List: %v, want %v naming %s", err, tt.want, name)
			}
			_, err = s.Submit(ctx, req("pond-x", "exit 0"))
			if err == nil || !strings.Contains(err.Error(), tt.want.Error()) || !strings.Contains(err.Error(), name) {
				t.Errorf("Submit: %v, want %v naming %s", err, tt.want, name)
			}
			if err := s.Cancel(ctx, "pond-x"); err == nil {
				t.Errorf("Cancel on a host it cannot ask: no error")
			}
		})
	}

	// A stopped host: the others still take glideins, List names it.
	s := newSite(t, srv, nil)
	srv.Stop(2)
	ctx := context.Background()
	if _, err := s.Submit(ctx, req("pond-up", "exec sleep 300")); err != nil {
		t.Fatalf("Submit with one host down: %v", err)
	}
	gs, err := s.List(ctx, glidein.IDPrefix)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), srv.Hosts[2]) || len(gs) != 1 {
		t.Errorf("List with a host down: %+v, %v", gs, err)
	}
	if err := s.Cancel(ctx, "pond-up"); err != nil {
		t.Errorf("Cancel, found on a host that answers: %v", err)
	}
}

// TestAgent logs in with the keys of a real ssh-agent.
func TestAgent(t *testing.T) {
	srv := sshtest.Start(t, 1)
	sock := srv.Agent(t)
	s := newSite(t, srv, func(c *Config) { c.KeyFile = ""; c.AgentSocket = sock })
	ctx := context.Background()
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if _, err := s.Submit(ctx, req("pond-agent", "exit 0")); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	waitState(t, s, "pond-agent", glidein.Done)
}

// TestBinaryVerified: a binary damaged on the host is found and copied
// again.
func TestBinaryVerified(t *testing.T) {
	srv := sshtest.Start(t, 1)
	ctx := context.Background()
	s := newSite(t, srv, func(c *Config) { c.Slots = 5 })
	if _, err := s.Submit(ctx, req("pond-1", "exit 0")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(srv.Dir, "base", "bin", "pondctl-"+sum(t, shell))
	fi1, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, req("pond-2", "exit 0")); err != nil {
		t.Fatal(err)
	}
	if fi2, err := os.Stat(path); err != nil || !os.SameFile(fi1, fi2) {
		t.Errorf("the binary was copied again for a second glidein (%v)", err)
	}
	if err := os.WriteFile(path, []byte("damaged"), 0o700); err != nil {
		t.Fatal(err)
	}
	s2 := newSite(t, srv, func(c *Config) { c.Slots = 5 })
	if _, err := s2.Submit(ctx, req("pond-3", "exit 0")); err != nil {
		t.Fatal(err)
	}
	if got := sum(t, path); got != sum(t, shell) {
		t.Errorf("damaged binary kept: sha256 %s", got)
	}
	waitState(t, s2, "pond-3", glidein.Done)
}

// TestCancelKills: a glidein that ignores TERM is killed after the grace
// period, with every process of its session.
func TestCancelKills(t *testing.T) {
	srv := sshtest.Start(t, 1)
	s := newSite(t, srv, func(c *Config) { c.KillGrace = time.Second })
	ctx := context.Background()
	g, err := s.Submit(ctx, req("pond-stubborn", "trap '' TERM; sleep 300 & sleep 300; wait"))
	if err != nil {
		t.Fatal(err)
	}
	sid := sidOf(t, g)
	for len(sessionProcs(t, sid)) < 4 { // wrapper, timeout, sh, two sleeps
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	if err := s.Cancel(ctx, g.ID); err != nil {
		t.Fatalf("Cancel: %v", err)
	}

	if d := time.Since(start); d < time.Second {
		t.Errorf("Cancel took %v: a glidein that ignores TERM has a grace period of 1s", d)
	}
	if ps := sessionProcs(t, sid); len(ps) != 0 {
		t.Errorf("processes left: %+v", ps)
	}
	if pids, _ := srv.Processes(); len(pids) != 0 {
		t.Errorf("processes left on the host: %v", pids)
	}
}

// TestSameIDTwoSites: two sites (two pondctl) submitting the same ID at
// once start it once.
func TestSameIDTwoSites(t *testing.T) {
	srv := sshtest.Start(t, 1)
	ctx := context.Background()
	sites := []*Site{newSite(t, srv, func(c *Config) { c.Slots = 2 }), newSite(t, srv, func(c *Config) { c.Slots = 2 })}
	errs := make([]error, len(sites))
	var wg sync.WaitGroup
	for i, s := range sites {
		wg.Go(func() { _, errs[i] = s.Submit(ctx, req("pond-once", "exec sleep 300")) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, glidein.ErrDuplicate):
			t.Errorf("Submit: %v, want nil or ErrDuplicate", err)
		}
	}
	gs, err := sites[0].List(ctx, glidein.IDPrefix)
	if ok != 1 || err != nil || len(gs) != 1 {
		t.Errorf("%d submissions succeeded; List: %+v, %v", ok, gs, err)
	}
	if g, _ := find(gs, "pond-once"); len(sessionProcs(t, sidOf(t, g))) == 0 {
		t.Errorf("the glidein does not run")
	}
}

// TestHandshakeTimeout: a host that takes the connection but never
// speaks SSH (a firewall, a hung sshd) fails within the connect timeout.
func TestHandshakeTimeout(t *testing.T) {
	srv := sshtest.Start(t, 1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	s := newSite(t, srv, func(c *Config) { c.Hosts = []string{l.Addr().String()}; c.ConnectTimeout = 500 * time.Millisecond })
	start := time.Now()
	err = s.Check(context.Background())
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Errorf("Check: %v, want ErrUnreachable naming %s", err, l.Addr())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Check took %v with a connect timeout of 500ms", d)
	}
}

// TestHungConnection: a connection whose far side stopped answering
// (a host gone without closing it) is given up after the connect
// timeout and replaced by a new one.
func TestHungConnection(t *testing.T) {
	srv := sshtest.Start(t, 1)
	s := newSite(t, srv, func(c *Config) { c.ConnectTimeout = time.Second })
	ctx := context.Background()
	if _, err := s.List(ctx, glidein.IDPrefix); err != nil {
		t.Fatal(err)
	}
	// Stop the processes of the site's connection: the children of the
	// listening sshd, and theirs.
	var stopped []int
	parents := map[int]bool{srv.PID(0): true}
	for range 3 {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || parents[pid] {
				continue
			}
			stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err != nil {
				continue
			}
			f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
			if ppid, _ := strconv.Atoi(f[1]); parents[ppid] {
				parents[pid] = true
				if err := syscall.Kill(pid, syscall.SIGSTOP); err == nil {
					stopped = append(stopped, pid)
				}
			}
		}
	}
	t.Cleanup(func() {
		for _, pid := range stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	if len(stopped) == 0 {
		t.Fatal("found no process of the connection to stop")
	}
	start := time.Now()
	if _, err := s.List(ctx, glidein.IDPrefix); err != nil {
		t.Fatalf("List over a new connection: %v", err)
	}
	if d := time.Since(start); d < time.Second || d > 10*time.Second {
		t.Errorf("List took %v, want a little more than the connect timeout (1s)", d)
	}
}

// TestBaseDirUnusable: a base directory that cannot be made is reported
// by Check and by Submit, naming the host.
func TestBaseDirUnusable(t *testing.T) {
	srv := sshtest.Start(t, 1)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := newSite(t, srv, func(c *Config) { c.BaseDir = file + "/base" })
	ctx := context.Background()
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), srv.Hosts[0]) || !strings.Contains(err.Error(), file) {
		t.Errorf("Check: %v, want an error naming the host and %s", err, file)
	}
	if _, err := s.Submit(ctx, req("pond-x", "exit 0")); err == nil || !strings.Contains(err.Error(), srv.Hosts[0]) || !strings.Contains(err.Error(), file) {
		t.Errorf("Submit: %v, want an error naming the host and %s", err, file)
	}
}

// TestMissingCommands: a host without setsid and timeout is refused by
// Check and Submit, which say what it lacks.
func TestMissingCommands(t *testing.T) {
	bin := t.TempDir()
	for _, c := range []string{"sh", "sed", "cat", "mkdir", "mv", "rm", "chmod", "uname", "date", "kill", "sha256sum", "sleep"} {
		path, err := exec.LookPath(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(path, filepath.Join(bin, c)); err != nil {
			t.Fatal(err)
		}
	}
	srv := sshtest.StartWith(t, 1, sshtest.Options{Env: map[string]string{"PATH": bin}})
	s := newSite(t, srv, nil)
	ctx := context.Background()
	want := "missing commands: setsid timeout"
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), srv.Hosts[0]) {
		t.Errorf("Check: %v, want %q naming the host", err, want)
	}
	if _, err := s.Submit(ctx, req("pond-x", "exit 0")); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Submit: %v, want %q", err, want)
	}
	if entries, _ := filepath.Glob(filepath.Join(srv.Dir, "base", "hosts", "*", "*")); len(entries) != 0 {
		t.Errorf("left on the host: %v", entries)
	}
}

// TestWriteFiles replaces a file of a running glidein through the site,
// as a factory refreshes a token: the glidein reads the new content; a
// glidein that ended or that no host has is an error.
func TestWriteFiles(t *testing.T) {
	srv := sshtest.Start(t, 2)
	s := newSite(t, srv, nil)
	ctx := context.Background()
	r := req("pond-w", `while :; do cat "$1/token" > "$1/seen"; sleep 0.1; done`)
	r.Args = append(r.Args, "glidein", "{dir}")
	r.Files = map[string][]byte{"token": []byte("old")}
	if _, err := s.Submit(ctx, r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Cancel(ctx, "pond-w") })
	waitState(t, s, "pond-w", glidein.Running)
	if err := s.WriteFiles(ctx, "pond-w", map[string][]byte{"token": []byte("new")}); err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	matches, _ := filepath.Glob(filepath.Join(srv.Dir, "base", "hosts", "*", "pond-w", "seen"))
	if len(matches) != 1 {
		t.Fatalf("seen files: %v", matches)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(matches[0])
		if string(data) == "new" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the glidein reads %q, want the new token", data)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if info, err := os.Stat(filepath.Join(filepath.Dir(matches[0]), "token")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v, %v", info, err)
	}
	for _, tc := range []struct {
		id    string
		files map[string][]byte
	}{
		{"pond-none", map[string][]byte{"token": []byte("x")}},
		{"pond-w", map[string][]byte{"../escape": []byte("x")}},
		{"pond-w", map[string][]byte{"glidein.marker": []byte("x")}},
	} {
		if err := s.WriteFiles(ctx, tc.id, tc.files); err == nil {
			t.Errorf("WriteFiles(%s, %v) succeeded", tc.id, tc.files)
		}
	}
	if err := s.Cancel(ctx, "pond-w"); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFiles(ctx, "pond-w", map[string][]byte{"token": []byte("x")}); err == nil {
		t.Error("WriteFiles into a cancelled glidein succeeded")
	}
}
