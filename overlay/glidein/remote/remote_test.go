package remote_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/remote"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

func TestParseHost(t *testing.T) {
	for _, tc := range []struct {
		in, user, addr, err string
	}{
		{"login1", "", "login1:22", ""},
		{"pond@login1:2222", "pond", "login1:2222", ""},
		{"[::1]", "", "[::1]:22", ""},
		{"ops@[2001:db8::7]:22", "ops", "[2001:db8::7]:22", ""},
		{"", "", "", "empty host"},
		{"@h", "", "", "is not a user name"},
		{"-o@h", "", "", "is not a user name"},
		{"h:0", "", "", "port \"0\""},
		{"h:99999", "", "", "port \"99999\""},
		{"a;b", "", "", "not a host name"},
		{"-oProxyCommand=x", "", "", "not a host name"},
		{"::1", "", "", "too many colons"},
	} {
		u, a, err := remote.ParseHost(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseHost(%q): %q %q %v, want an error containing %q", tc.in, u, a, err, tc.err)
			}
			continue
		}
		if err != nil || u != tc.user || a != tc.addr {
			t.Errorf("ParseHost(%q) = %q, %q, %v; want %q, %q", tc.in, u, a, err, tc.user, tc.addr)
		}
	}
}

func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"login1", "pond@login1:2222", "[::1]:22", "a@b@c", "h:0", "-x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, a, err := remote.ParseHost(s)
		if err != nil {
			return
		}
		// What it accepts is safe on a command line and reads back the same.
		if strings.ContainsAny(a, " \t\n'\"$;&|`") || strings.HasPrefix(a, "-") || strings.ContainsAny(u, " \t\n'\"/@") {
			t.Fatalf("ParseHost(%q) accepted %q, %q", s, u, a)
		}
		entry := a
		if u != "" {
			entry = u + "@" + a
		}
		u2, a2, err := remote.ParseHost(entry)
		if err != nil || u2 != u || a2 != a {
			t.Fatalf("ParseHost(%q) = %q %q, but ParseHost(%q) = %q %q %v", s, u, a, entry, u2, a2, err)
		}
	})
}

// FuzzCommandLine: a command line, run by sh, gives the program exactly
// the arguments it was made of.
func FuzzCommandLine(f *testing.F) {
	for _, s := range []string{"", "a b", "it's", `"$HOME"`, "`id`", "a\nb", "-n", "\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		if strings.ContainsRune(arg, 0) {
			return
		}
		line := remote.CommandLine(remote.Cmd{Path: "printf", Args: []string{"%s", arg}, Env: []string{"X=" + arg}})
		out, err := exec.Command("/bin/sh", "-c", line).Output()
		if err != nil {
			t.Fatalf("sh -c %q: %v", line, err)
		}
		if string(out) != arg {
			t.Fatalf("sh -c %q printed %q, want %q", line, out, arg)
		}
	})
}

func newSSH(t *testing.T, srv *sshtest.Servers) *remote.SSH {
	t.Helper()
	host, port := splitHostPort(t, srv.Hosts[0])
	r, err := remote.NewSSH(remote.SSHConfig{Host: host, Port: port, User: srv.User, KeyFile: srv.KeyFile, KnownHosts: srv.KnownHosts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func splitHostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	_, a, err := remote.ParseHost(addr)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndexByte(a, ':')
	var p int
	for _, c := range a[i+1:] {
		p = p*10 + int(c-'0')
	}
	return a[:i], p
}

// TestSSHOneConnection runs many commands at once over one connection:
// sshd sees one login; exit statuses, standard error and standard input
// come through; a missing program is NotFound.
func TestSSHOneConnection(t *testing.T) {
	t.Parallel()
	srv := sshtest.Start(t, 1)
	r := newSSH(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			out, _, err := r.Run(ctx, remote.Cmd{Path: "cat", Stdin: strings.NewReader(strings.Repeat("x", i))})
			if err != nil || string(out) != strings.Repeat("x", i) {
				errs <- errors.Join(err, errors.New("cat said "+string(out)))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_, stderr, err := r.Run(ctx, remote.Cmd{Path: "/bin/sh", Args: []string{"-c", "echo no >&2; exit 3"}})
	var ee *remote.ExitError
	if !errors.As(err, &ee) || ee.Status != 3 || strings.TrimSpace(string(stderr)) != "no" {
		t.Errorf("exit 3: %v, stderr %q", err, stderr)
	}
	if _, _, err := r.Run(ctx, remote.Cmd{Path: "/no/such/program"}); !remote.IsNotFound(err) {
		t.Errorf("a missing program: %v, want NotFound", err)
	}
	if n := strings.Count(srv.Log(0), "Accepted publickey"); n != 1 {
		t.Errorf("%d logins for 22 commands, want 1:\n%s", n, srv.Log(0))
	}
}

// TestSSHLost: a command whose sshd went away meanwhile fails with
// ErrLost (not an exit status), and the next command connects again.
func TestSSHLost(t *testing.T) {
	t.Parallel()
	srv := sshtest.Start(t, 1)
	r := newSSH(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mark := filepath.Join(t.TempDir(), "started")
	done := make(chan error, 1)
	go func() {
		_, _, err := r.Run(ctx, remote.Cmd{Path: "/bin/sh", Args: []string{"-c", "touch " + mark + "; sleep 30"}})
		done <- err
	}()
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("killed sshd %v", srv.CutConnections(0))
	select {
	case err := <-done:
		if !errors.Is(err, remote.ErrLost) {
			t.Fatalf("a command whose connection went away: %v, want ErrLost", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its connection went away")
	}
	if _, _, err := r.Run(ctx, remote.Cmd{Path: "true"}); err != nil {
		t.Fatalf("the next command: %v, want it run on a new connection", err)
	}
	srv.CutConnections(0)
	srv.Stop(0)
	if _, _, err := r.Run(ctx, remote.Cmd{Path: "true"}); !errors.Is(err, remote.ErrUnreachable) {
		t.Fatalf("with sshd stopped: %v, want ErrUnreachable", err)
	}
}

// TestSSHRefusesUnknownHost: an empty known_hosts file refuses the host.
func TestSSHRefusesUnknownHost(t *testing.T) {
	t.Parallel()
	srv := sshtest.Start(t, 1)
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	host, port := splitHostPort(t, srv.Hosts[0])
	r, err := remote.NewSSH(remote.SSHConfig{Host: host, Port: port, User: srv.User, KeyFile: srv.KeyFile, KnownHosts: known})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, _, err = r.Run(context.Background(), remote.Cmd{Path: "true"})
	if !errors.Is(err, remote.ErrUnknownHost) || !strings.Contains(err.Error(), known) {
		t.Fatalf("unknown host: %v", err)
	}
	if strings.Contains(srv.Log(0), "Accepted") {
		t.Fatal("logged in to an unknown host")
	}
}

// TestSSHMissingKnownHosts: a known_hosts file that does not exist is
// an error naming it and what to do, before anything is reached.
func TestSSHMissingKnownHosts(t *testing.T) {
	t.Parallel()
	known := filepath.Join(t.TempDir(), "known_hosts")
	_, err := remote.NewSSH(remote.SSHConfig{Host: "login1", Port: 2222, User: "pond", KnownHosts: known})
	if err == nil {
		t.Fatal("a missing known_hosts file was accepted")
	}
	for _, want := range []string{"known_hosts_file " + known + " does not exist", "restore the file", "ssh-keyscan -p 2222 login1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing known_hosts: %v, want it to say %q", err, want)
		}
	}
}

// TestSSHJump reaches a host through a jump host, both checked against
// known_hosts; a jump host that is not known is refused, naming it.
func TestSSHJump(t *testing.T) {
	t.Parallel()
	srv := sshtest.Start(t, 2)
	host, port := splitHostPort(t, srv.Hosts[1])
	cfg := remote.SSHConfig{Host: host, Port: port, User: srv.User, KeyFile: srv.KeyFile, KnownHosts: srv.KnownHosts, Jump: srv.Hosts[0]}
	r, err := remote.NewSSH(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _, err := r.Run(ctx, remote.Cmd{Path: "/bin/sh", Args: []string{"-c", "echo $SSH_CONNECTION"}})
	if err != nil {
		t.Fatal(err)
	}
	// SSH_CONNECTION: CLIENT_IP CLIENT_PORT SERVER_IP SERVER_PORT.
	if f := strings.Fields(string(out)); len(f) != 4 || f[2] != host {
		t.Fatalf("SSH_CONNECTION %q on %s", out, srv.Hosts[1])
	}
	for i := range 2 {
		if !strings.Contains(srv.Log(i), "Accepted publickey") {
			t.Errorf("host %d: no login:\n%s", i, srv.Log(i))
		}
	}
	// Only the target in known_hosts: the jump host is refused.
	known := filepath.Join(t.TempDir(), "known_hosts")
	lines := strings.Split(strings.TrimSpace(readFile(t, srv.KnownHosts)), "\n")
	if err := os.WriteFile(known, []byte(lines[1]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.KnownHosts = known
	r2, err := remote.NewSSH(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if _, _, err := r2.Run(ctx, remote.Cmd{Path: "true"}); !errors.Is(err, remote.ErrUnknownHost) || !strings.Contains(err.Error(), "jump host") {
		t.Fatalf("unknown jump host: %v", err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
