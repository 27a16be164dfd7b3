package ssh

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		entry, user, addr string
		err               string
	}{
		{"node1", "", "node1:22", ""},
		{"node1:2222", "", "node1:2222", ""},
		{"alice@node1", "alice", "node1:22", ""},
		{"alice@node1:2222", "alice", "node1:2222", ""},
		{"alice@10.0.0.1:22", "alice", "10.0.0.1:22", ""},
		{"[::1]:22", "", "[::1]:22", ""},
		{"[::1]", "", "[::1]:22", ""},
		{"bob@[::1]:22", "bob", "[::1]:22", ""},
		{"bob@[::1]", "bob", "[::1]:22", ""},
		{"bob@[fe80::1%eth0]:22", "bob", "[fe80::1%eth0]:22", ""},
		{"svc.user_1-x$@h", "svc.user_1-x$", "h:22", ""},
		{"node1:022", "", "node1:22", ""},

		{"", "", "", "empty host"},
		{"  ", "", "", "empty host"},
		{"@node1:22", "", "", `host "@node1:22": empty user before '@'`},
		{"a@b@node1", "", "", `host "a@b@node1": more than one '@'`},
		{"-oProxyCommand=x@node1", "", "", `user "-oProxyCommand=x"`},
		{"al ice@node1", "", "", `user "al ice"`},
		{"alice@", "", "", `host "alice@": no host name or address`},
		{"alice@:22", "", "", `host "alice@:22": no host name or address`},
		{"alice@node1:99999", "", "", `host "alice@node1:99999": port "99999" is not a number from 1 to 65535`},
		{"alice@node1:0", "", "", `port "0" is not a number`},
		{"node1:", "", "", `port "" is not a number`},
		{"node1:+22", "", "", `port "+22" is not a number`},
		{"node1:ssh", "", "", `port "ssh" is not a number`},
		{"::1", "", "", `host "::1": an IPv6 address needs brackets`},
		{"alice@::1:22", "", "", `host "alice@::1:22": an IPv6 address needs brackets`},
		{"[::1", "", "", `host "[::1"`},
		{"[node1:22]", "", "", `is not a host name or address`},
		{"node/1", "", "", `"node/1" is not a host name or address`},
		{"no de", "", "", `is not a host name or address`},
		{"node1;reboot", "", "", `is not a host name or address`},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			user, addr, err := parseHost(tt.entry)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseHost(%q) = %q, %q, %v; want an error with %q", tt.entry, user, addr, err, tt.err)
				}
				return
			}
			if err != nil || user != tt.user || addr != tt.addr {
				t.Fatalf("parseHost(%q) = %q, %q, %v; want %q, %q", tt.entry, user, addr, err, tt.user, tt.addr)
			}
		})
	}
}

// FuzzParseHost: parseHost never panics, and what it accepts is an
// address with a port from 1 to 65535 that it parses again to itself,
// with the same user once the user is put back in front.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"node1", "alice@node1:2222", "[::1]:22", "bob@[::1]", "@h", "a@b@c", "::1", "h:0", "[fe80::1%eth0]:22", "h:+1", "x@[a]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		user, addr, err := parseHost(entry)
		if err != nil {
			if user != "" || addr != "" {
				t.Fatalf("parseHost(%q) failed (%v) but returned %q, %q", entry, err, user, addr)
			}
			if entry != "" && strings.TrimSpace(entry) != "" && !strings.Contains(err.Error(), strconv.Quote(entry)) {
				t.Fatalf("parseHost(%q): the error %q does not quote the entry", entry, err)
			}
			return
		}
		h, p, err := net.SplitHostPort(addr)
		if err != nil || h == "" {
			t.Fatalf("parseHost(%q) = %q, not HOST:PORT: %v", entry, addr, err)
		}
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			t.Fatalf("parseHost(%q) = %q: port %q", entry, addr, p)
		}
		if strings.ContainsAny(user, "@ \t\n") || strings.HasPrefix(user, "-") {
			t.Fatalf("parseHost(%q): user %q", entry, user)
		}
		if u2, a2, err := parseHost(addr); err != nil || u2 != "" || a2 != addr {
			t.Fatalf("parseHost(%q) = %q, but parseHost(%q) = %q, %q, %v", entry, addr, addr, u2, a2, err)
		}
		if user != "" {
			if u2, a2, err := parseHost(user + "@" + addr); err != nil || u2 != user || a2 != addr {
				t.Fatalf("parseHost(%q) = %q, %q, but parseHost(%q) = %q, %q, %v", entry, user, addr, user+"@"+addr, u2, a2, err)
			}
		}
	})
}

// TestNewHosts: each entry's user logs in on its host, the others take
// Config.User; an address is listed once, whatever its user, and a bad
// entry is named in the error.
func TestNewHosts(t *testing.T) {
	dir := t.TempDir()
	known := dir + "/known_hosts"
	if err := writeFile(known, ""); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Hosts: []string{"alice@node1", "node2:2222", "bob@[::1]:22"}, User: "carol", KnownHosts: known, AgentSocket: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range s.hosts {
		got = append(got, h.user+" "+h.addr+" "+h.key)
	}
	if want := "alice node1:22 node1_22|carol node2:2222 node2_2222|bob [::1]:22 ___1__22"; strings.Join(got, "|") != want {
		t.Errorf("hosts %s, want %s", strings.Join(got, "|"), want)
	}
	for _, tt := range []struct {
		hosts []string
		err   string
	}{
		{[]string{"alice@node1:22", "bob@node1"}, `hosts[1] "bob@node1": node1:22 is listed twice (hosts[0] "alice@node1:22")`},
		{[]string{"alice@node1", "node1:22"}, `hosts[1] "node1:22": node1:22 is listed twice`},
		{[]string{"node1", "node1:022"}, `node1:22 is listed twice`},
		{[]string{"node1", "@node2"}, `hosts[1]: host "@node2": empty user`},
		{[]string{"alice@node1:70000"}, `hosts[0]: host "alice@node1:70000": port "70000"`},
	} {
		if _, err := New(Config{Hosts: tt.hosts, KnownHosts: known, AgentSocket: "/x"}); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("New(%q): %v, want an error with %q", tt.hosts, err, tt.err)
		}
	}
}

// TestUserAtHost logs in to real sshd with hosts given as
// "user@host:port" while the site's own user does not exist: the entry's
// user logs in, a glidein runs, and a site that names the host without a
// user (the same user as its User) finds and cancels it, since a host is
// known by its address. A host whose entry names no user logs in as the
// site's user, and one whose entry names a user the key is not authorized
// for is refused with that user named.
func TestUserAtHost(t *testing.T) {
	srv := sshtest.Start(t, 2)
	const nobody = "pond-no-such-user"
	s := newSite(t, srv, func(c *Config) {
		c.User = nobody
		c.Hosts = []string{srv.User + "@" + srv.Hosts[0]}
	})
	ctx := context.Background()
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check with %s@%s: %v", srv.User, srv.Hosts[0], err)
	}
	g, err := s.Submit(ctx, req("pond-userat", "sleep 60"))
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if g.Host != srv.Hosts[0] {
		t.Errorf("the glidein is on host %q, want its address %q", g.Host, srv.Hosts[0])
	}
	waitState(t, s, "pond-userat", glidein.Running)

	plain := newSite(t, srv, func(c *Config) { c.Hosts = []string{srv.Hosts[0]} })
	gs, err := plain.List(ctx, glidein.IDPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := find(gs, "pond-userat"); !ok || got.Host != srv.Hosts[0] || got.State != glidein.Running {
		t.Fatalf("the site without user@ lists %+v", gs)
	}
	if err := plain.Cancel(ctx, "pond-userat"); err != nil {
		t.Fatal(err)
	}
	if gs, err := s.List(ctx, glidein.IDPrefix); err != nil || len(gs) != 0 {
		t.Fatalf("after Cancel: %+v, %v", gs, err)
	}

	for _, tt := range []struct {
		name, entry, user string
	}{
		{"the site's user", srv.Hosts[1], nobody},
		{"the entry's user", nobody + "@" + srv.Hosts[1], srv.User},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := newSite(t, srv, func(c *Config) { c.User = tt.user; c.Hosts = []string{tt.entry} })
			err := bad.Check(ctx)
			if !errors.Is(err, ErrKeyRejected) || !strings.Contains(err.Error(), "user "+nobody) || !strings.Contains(err.Error(), srv.Hosts[1]) {
				t.Fatalf("Check of %s with user %s: %v, want %v naming user %s and the host", tt.entry, tt.user, err, ErrKeyRejected, nobody)
			}
		})
	}
}
