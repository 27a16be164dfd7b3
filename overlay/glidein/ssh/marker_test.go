package ssh

import (
	"bytes"
	"debug/elf"
	"os"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/pond-htc/pond/overlay/glidein"
)

const fullMarker = `pond-glidein 1
id=pond-a1
host=node1:22
submitted=1764052800
lifetime=3600
binary=` + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + `
pid=4242
start=123456
boot=7d9c-aa
started=1764052801
sid=4242
status=0
ended=1764056400
`

func TestParseMarker(t *testing.T) {
	m, err := parseMarker([]byte(fullMarker))
	if err != nil {
		t.Fatal(err)
	}
	want := marker{ID: "pond-a1", Host: "node1:22", Submitted: time.Unix(1764052800, 0).UTC(), Lifetime: time.Hour,
		Binary: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", PID: 4242, SID: 4242, Start: 123456,
		Boot: "7d9c-aa", Started: time.Unix(1764052801, 0).UTC(), HasStatus: true, Status: 0, Ended: time.Unix(1764056400, 0).UTC()}
	if m != want {
		t.Errorf("parsed\n%+v\nwant\n%+v", m, want)
	}
	tests := []struct {
		name, text, err string
	}{
		{"no header", "id=pond-a\n", "first line"},
		{"empty", "", "first line"},
		{"no id", markerHeader + "\nhost=x\n", "no id"},
		{"bad id", markerHeader + "\nid=other\n", `does not start with "pond-"`},
		{"twice", markerHeader + "\nid=pond-a\nid=pond-b\n", "id given twice"},
		{"not key=value", markerHeader + "\nid=pond-a\nhello\n", "line 3"},
		{"bad pid", markerHeader + "\nid=pond-a\npid=-1\n", "pid"},
		{"bad status", markerHeader + "\nid=pond-a\nstatus=300\n", "status"},
		{"bad sum", markerHeader + "\nid=pond-a\nbinary=xyz\n", "sha256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseMarker([]byte(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v, want one with %q", err, tt.err)
			}
		})
	}
	// A line being written is ignored; unknown keys too.
	m, err = parseMarker([]byte(markerHeader + "\nid=pond-a\nfuture=1\nstatus=1"))
	if err != nil || m.HasStatus || m.ID != "pond-a" {
		t.Errorf("partial last line: %+v, %v", m, err)
	}
}

func TestJudge(t *testing.T) {
	now := time.Unix(1764052900, 0)
	base := marker{ID: "pond-a", Submitted: now.Add(-time.Minute), Lifetime: time.Hour, PID: 100, SID: 100, Start: 5000, Boot: "b1", Started: now.Add(-50 * time.Second)}
	ended := func(status int, after time.Duration) marker {
		m := base
		m.HasStatus, m.Status, m.Ended = true, status, m.Started.Add(after)
		return m
	}
	notStarted := base
	notStarted.PID, notStarted.SID = 0, 0
	longAgo := notStarted
	longAgo.Submitted = now.Add(-time.Hour)
	leader := proc{PID: 100, SID: 100, Start: 5000, State: "S"}
	child := proc{PID: 101, SID: 100, Start: 5001, State: "S"}
	tests := []struct {
		name   string
		m      marker
		boot   string
		procs  []proc
		state  glidein.State
		reason string
	}{
		{"running", base, "b1", []proc{leader, child}, glidein.Running, ""},
		{"orphaned children still run", base, "b1", []proc{child}, glidein.Running, ""},
		{"recycled pid", base, "b1", []proc{{PID: 100, SID: 100, Start: 9000, State: "S"}}, glidein.Cancelled, "killed on the host"},
		{"zombie", base, "b1", []proc{{PID: 100, SID: 100, Start: 5000, State: "Z"}}, glidein.Cancelled, "killed on the host"},
		{"older process of the session id", base, "b1", []proc{{PID: 99, SID: 100, Start: 10, State: "S"}}, glidein.Cancelled, "killed on the host"},
		{"rebooted", base, "b2", []proc{leader}, glidein.Failed, "rebooted"},
		{"done", ended(0, time.Minute), "b1", nil, glidein.Done, "status 0"},
		{"exit 2", ended(2, time.Minute), "b1", nil, glidein.Failed, "exited with status 2"},
		{"timeout", ended(124, time.Hour), "b1", nil, glidein.Failed, "lifetime"},
		{"killed at lifetime", ended(137, time.Hour+time.Second), "b1", nil, glidein.Failed, "lifetime"},
		{"killed", ended(137, time.Minute), "b1", nil, glidein.Cancelled, "SIGKILL on the host"},
		{"terminated", ended(143, time.Minute), "b1", nil, glidein.Cancelled, "SIGTERM on the host"},
		{"segfault", ended(139, time.Minute), "b1", nil, glidein.Failed, "SIGSEGV"},
		{"exited, children remain", ended(0, time.Minute), "b1", []proc{child}, glidein.Running, "processes of its session remain"},
		{"starting", notStarted, "b1", nil, glidein.Queued, "starting"},
		{"never started", longAgo, "b1", nil, glidein.Failed, "never started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, reason := judge(tt.m, tt.boot, tt.procs, now)
			if st != tt.state || !strings.Contains(reason, tt.reason) {
				t.Errorf("judge = %s %q, want %s %q", st, reason, tt.state, tt.reason)
			}
		})
	}
}

func TestParseListing(t *testing.T) {
	out := "@host Linux x86_64 b1\n@base /home/u/.pond\n@bin abc\n@glidein pond-a\n" + fullMarker + "\n@end\n" +
		"@glidein pond-b\n@nomarker 1764052800\n@glidein pond-c\n" + markerHeader + "\nid=pond-c\nsid=1\npartial" + "\n@end\n" +
		"@proc 4242 4242 123456 S\n"
	l, err := parseListing([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if l.OS != "Linux" || l.Machine != "x86_64" || l.BootID != "b1" || l.Base != "/home/u/.pond" || len(l.Binaries) != 1 {
		t.Errorf("host: %+v", l)
	}
	if len(l.Glideins) != 3 || string(l.Glideins[0].Marker) != fullMarker || !l.Glideins[1].NoMarker || l.Glideins[1].Made.Unix() != 1764052800 {
		t.Fatalf("glideins: %+v", l.Glideins)
	}
	if m, err := parseMarker(l.Glideins[2].Marker); err != nil || m.SID != 1 {
		t.Errorf("marker with a partial line: %+v, %v", m, err)
	}
	if len(l.Procs) != 1 || l.Procs[0] != (proc{PID: 4242, SID: 4242, Start: 123456, State: "S"}) {
		t.Errorf("procs: %+v", l.Procs)
	}
	// Status files follow their glidein's marker: at most two, bounded.
	st := `{"id":"pond-a","reason":"validation","message":"validation failed: check disk: full"}`
	l, err = parseListing([]byte("@host Linux x86_64 b1\n@glidein pond-a\n" + fullMarker + "\n@end\n@status " + st + "\n@status {}\n"))
	if err != nil || len(l.Glideins) != 1 || len(l.Glideins[0].Status) != 2 || string(l.Glideins[0].Status[0]) != st {
		t.Errorf("status files: %+v, %v", l.Glideins, err)
	}
	if got := validationDetail("pond-a", l.Glideins[0].Status); got != "validation failed: check disk: full" {
		t.Errorf("validationDetail: %q", got)
	}
	// A glidein listed again after the processes (its wrapper recorded
	// its status meanwhile) is as the later listing says.
	again := "@host Linux x86_64 b1\n@glidein pond-a\n" + markerHeader + "\nid=pond-a\nsid=1\n@end\n@glidein pond-b\n@nomarker 1\n" +
		"@proc 7 1 5 S\n@glidein pond-a\n" + fullMarker + "\n@end\n"
	l, err = parseListing([]byte(again))
	if err != nil || len(l.Glideins) != 2 || l.Glideins[1].Name != "pond-a" || string(l.Glideins[1].Marker) != fullMarker || l.Glideins[0].Name != "pond-b" {
		t.Errorf("a glidein listed twice: %+v, %v", l.Glideins, err)
	}
	for _, bad := range []string{"", "@host Linux\n", "@glidein pond-a\nid=x\n", "@proc 1 2\n@host a b c\n", "what\n", "@host a b c\n@glidein pond-a\n@nomarker x\n",
		"@host a b c\n@status {}\n", "@host a b c\n@glidein pond-a\n@nomarker 1\n@status {}\n",
		"@host a b c\n@glidein pond-a\nid=pond-a\n@end\n@status {}\n@status {}\n@status {}\n",
		"@host a b c\n@glidein pond-a\nid=pond-a\n@end\n@status " + strings.Repeat("x", maxStatusFile+1) + "\n"} {
		if _, err := parseListing([]byte(bad)); err == nil {
			t.Errorf("parseListing(%q): no error", bad)
		}
	}
}

func TestELFArch(t *testing.T) {
	tests := []struct {
		machine elf.Machine
		data    elf.Data
		want    string
		fits    string
	}{
		{elf.EM_X86_64, elf.ELFDATA2LSB, "linux/amd64", "x86_64"},
		{elf.EM_AARCH64, elf.ELFDATA2LSB, "linux/arm64", "aarch64"},
		{elf.EM_PPC64, elf.ELFDATA2LSB, "linux/ppc64le", "ppc64le"},
		{elf.EM_PPC64, elf.ELFDATA2MSB, "linux/ppc64", "ppc64"},
		{elf.EM_S390, elf.ELFDATA2MSB, "linux/s390x", "s390x"},
		{elf.EM_RISCV, elf.ELFDATA2LSB, "linux/riscv64", "riscv64"},
	}
	for _, tt := range tests {
		a, err := elfArch(bytes.NewReader(elfHeader(tt.machine, tt.data)))
		if err != nil || a.Name != tt.want || !a.fits("Linux", tt.fits) || a.fits("Linux", "mips") || a.fits("Darwin", tt.fits) {
			t.Errorf("%v: %+v, %v, want %s fitting %s", tt.machine, a, err, tt.want, tt.fits)
		}
	}
	// The running test binary, a Go ELF executable, is of this machine.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := elfArch(f)
	if want, _ := hostArch(); err != nil || a.Name != want.Name {
		t.Errorf("the test binary: %+v, %v, want %s", a, err, want.Name)
	}
	if _, err := elfArch(bytes.NewReader(elfHeader(elf.EM_MIPS, elf.ELFDATA2LSB))); err == nil {
		t.Errorf("MIPS: no error")
	}
	if _, err := elfArch(strings.NewReader("#!/bin/sh\n")); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("script: %v", err)
	}
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	known := dir + "/known_hosts"
	if err := writeFile(known, ""); err != nil {
		t.Fatal(err)
	}
	key := dir + "/key"
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"no hosts", Config{KnownHosts: known, KeyFile: key}, "no hosts"},
		{"bad port", Config{Hosts: []string{"a:99999"}, KnownHosts: known, KeyFile: key}, "port"},
		{"twice", Config{Hosts: []string{"a", "a:22"}, KnownHosts: known, KeyFile: key}, "listed twice"},
		{"no known_hosts", Config{Hosts: []string{"a"}, KeyFile: key}, "known_hosts file is required"},
		{"missing key", Config{Hosts: []string{"a"}, KnownHosts: known, KeyFile: dir + "/nope"}, "key"},
		{"no auth", Config{Hosts: []string{"a"}, KnownHosts: known, AgentSocket: ""}, "SSH_AUTH_SOCK"},
		{"negative slots", Config{Hosts: []string{"a"}, KnownHosts: known, AgentSocket: "/x", Slots: -1}, "slots"},
		{"negative grace", Config{Hosts: []string{"a"}, KnownHosts: known, AgentSocket: "/x", KillGrace: -time.Second}, "kill grace"},
	}
	t.Setenv("SSH_AUTH_SOCK", "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("New: %v, want an error with %q", err, tt.err)
			}
		})
	}
	s, err := New(Config{Hosts: []string{"node1", "[::1]:2222", "10.0.0.1:22"}, KnownHosts: known, AgentSocket: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range s.hosts {
		got = append(got, h.addr+"="+h.key)
	}
	if want := "node1:22=node1_22 [::1]:2222=___1__2222 10.0.0.1:22=10.0.0.1_22"; strings.Join(got, " ") != want {
		t.Errorf("hosts %s, want %s", strings.Join(got, " "), want)
	}
}

func TestCheckRequest(t *testing.T) {
	ok := glidein.Request{ID: "pond-a", Binary: "/bin/sh", Files: map[string][]byte{"token": nil}, Env: map[string]string{"A_1": "x"}}
	if err := checkRequest(ok); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mod  func(*glidein.Request)
		err  string
	}{
		{"id", func(r *glidein.Request) { r.ID = "pond-a b" }, "only letters"},
		{"long id", func(r *glidein.Request) { r.ID = "pond-" + strings.Repeat("a", 60) }, "longer than 64"},
		{"file path", func(r *glidein.Request) { r.Files = map[string][]byte{"../x": nil} }, "file"},
		{"dot file", func(r *glidein.Request) { r.Files = map[string][]byte{".x": nil} }, "file"},
		{"reserved file", func(r *glidein.Request) { r.Files = map[string][]byte{"glidein.marker": nil} }, "site's own"},
		{"env", func(r *glidein.Request) { r.Env = map[string]string{"A-B": ""} }, "environment"},
		{"env digit", func(r *glidein.Request) { r.Env = map[string]string{"1A": ""} }, "environment"},
		{"lifetime", func(r *glidein.Request) { r.Lifetime = -time.Second }, "lifetime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			tt.mod(&r)
			if err := checkRequest(r); err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("checkRequest: %v, want an error with %q", err, tt.err)
			}
		})
	}
}

func FuzzParseMarker(f *testing.F) {
	f.Add([]byte(fullMarker))
	f.Add([]byte(markerHeader + "\nid=pond-a\nstatus=1"))
	f.Add([]byte(markerHeader + "\nid=pond-a\nid=pond-a\n"))
	f.Add(formatMarker(marker{ID: "pond-x", Host: "h:22", Submitted: time.Unix(1, 0), Lifetime: time.Minute, Binary: strings.Repeat("a", 64)}))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseMarker(data)
		if err != nil {
			return
		}
		if validID(m.ID) != nil {
			t.Fatalf("parsed an invalid id %q", m.ID)
		}
		if m.HasStatus && (m.Status < 0 || m.Status > 255) {
			t.Fatalf("status %d", m.Status)
		}
		// What Submit writes of it reads back the same.
		again, err := parseMarker(formatMarker(m))
		if err != nil {
			t.Fatalf("formatMarker of a parsed marker: %v", err)
		}
		if again.ID != m.ID || again.Host != m.Host || again.Binary != m.Binary || again.Submitted != m.Submitted || again.Lifetime != m.Lifetime {
			t.Fatalf("round trip: %+v, then %+v", m, again)
		}
	})
}

func FuzzParseListing(f *testing.F) {
	f.Add([]byte("@host Linux x86_64 b1\n@base /x\n@glidein pond-a\n" + fullMarker + "\n@end\n@proc 1 1 1 S\n"))
	f.Add([]byte("@host Linux x86_64 b1\n@glidein pond-b\n@nomarker 12\n"))
	f.Add([]byte("@host Linux x86_64 b1\n@glidein pond-a\nid=pond-a\nsid=1\nstatus=3\n@end\n@status {\"id\":\"pond-a\",\"reason\":\"validation\",\"message\":\"check \\u001b\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := parseListing(data)
		if err != nil {
			return
		}
		s := &Site{now: time.Now}
		for _, g := range s.glideins(&host{addr: "h:22"}, l) {
			if validID(g.ID) != nil || g.State == "" {
				t.Fatalf("glidein %+v", g)
			}
			if _, why, ok := strings.Cut(g.Reason, "exited with status 3: "); ok && (len(why) > glidein.MaxMessage || strings.ContainsFunc(why, unicode.IsControl)) {
				t.Fatalf("reason %q", g.Reason)
			}
		}
	})
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o600) }
