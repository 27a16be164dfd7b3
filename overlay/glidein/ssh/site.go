// Package ssh is the glidein site of a list of SSH hosts: it starts
// glideins (a pondctl agent each) on hosts it reaches with
// golang.org/x/crypto/ssh, with a key file or an SSH agent, checking
// every host's key against a known_hosts file.
//
// On each host, under the base directory:
//
//	BASE/bin/pondctl-SHA256          the binary, copied once per host, verified
//	BASE/hosts/HOST/ID/              one glidein (0700): its Request.Files (0600),
//	    glidein.marker               its ID, process and exit status (the marker)
//	    glidein.run                  the wrapper that runs the agent under its lifetime
//	    glidein.env                  its Request.Env
//	    glidein.log                  the agent's output
//
// The wrapper runs in a session of its own (setsid): the glidein is every
// process of that session, which Cancel ends (TERM, then KILL after a
// grace period). The agent runs under timeout(1), so the host ends it at
// its lifetime even when nothing else does. The marker records the
// session's leader and its start time (from /proc/PID/stat) and the
// host's boot ID, so that a recycled PID is never taken for the glidein.
//
// The hosts must run Linux with a POSIX sh, setsid, timeout and
// sha256sum (coreutils, util-linux); Check says what is missing. A host
// whose systemd-logind kills a user's processes when the user logs out
// (KillUserProcesses=yes) needs lingering for the user (loginctl
// enable-linger). Request.CPUs and MemoryMB are not enforced: a host
// gives a glidein what it has; Slots bounds how many share it.
package ssh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/user"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
)

// Config configures an SSH site.
type Config struct {
	// Hosts are the hosts glideins may run on, as [USER@]HOST[:PORT]
	// (port 22 by default; an IPv6 address in brackets, "[::1]:22"). USER,
	// when given, logs in on that host instead of User. A host is known
	// by its address, HOST:PORT: its glideins are kept under it, so
	// renaming a host loses sight of them (changing its user does not),
	// and an address may be listed only once, with one user.
	Hosts []string
	// User logs in on the hosts whose entry names no user; the current
	// user by default.
	User string
	// KeyFile is the private key to log in with (OpenSSH or PEM format,
	// without a passphrase). Empty: the keys of the SSH agent.
	KeyFile string
	// AgentSocket is the SSH agent's socket, used when KeyFile is empty;
	// $SSH_AUTH_SOCK by default.
	AgentSocket string
	// KnownHosts is the known_hosts file every host's key is checked
	// against; required. An unknown host or a changed key is refused.
	KnownHosts string
	// BaseDir is the directory glideins and binaries are kept in on the
	// hosts; relative to the remote home unless absolute. Default
	// ".pond/glideins".
	BaseDir string
	// Slots is how many glideins one host runs at once (those not ended);
	// default 1. One site never exceeds it; two sites (two processes)
	// submitting to the same host at the same moment may, by one each.
	Slots int
	// ConnectTimeout bounds connecting to a host, handshake included;
	// default 10 s.
	ConnectTimeout time.Duration
	// DefaultLifetime is the lifetime of a glidein whose Request has
	// none; default 24 h.
	DefaultLifetime time.Duration
	// KillGrace is how long a glidein has between TERM and KILL, when it
	// is cancelled or reaches its lifetime; default 30 s.
	KillGrace time.Duration
	// Binary is the binary Check verifies the hosts' architecture
	// against. Empty: the running program's GOOS and GOARCH.
	Binary string
}

// Defaults of Config.
const (
	DefaultBaseDir        = ".pond/glideins"
	DefaultConnectTimeout = 10 * time.Second
	DefaultLifetime       = 24 * time.Hour
	DefaultKillGrace      = 30 * time.Second
)

// Limits of a Request, and the SSH port.
const (
	maxFiles          = 64
	maxFileSize int64 = 1 << 20
	defaultPort       = "22"
)

// Errors of Submit, wrapped with the reasons of every host.
var (
	// ErrFull: no host has a free slot (some may also be unreachable or
	// of another architecture). It is glidein.ErrFull.
	ErrFull = glidein.ErrFull
	// ErrArchitecture: no reachable host has the binary's architecture.
	ErrArchitecture = errors.New("no host has the binary's architecture")
)

// Site is an SSH site. It implements glidein.Site; Close closes its
// connections.
type Site struct {
	cfg   Config
	hosts []*host
	bins  binaryCache
	now   func() time.Time

	mu sync.Mutex
	// reserved holds the glideins submitted lately, by ID.
	reserved map[string]reservation
	// where is the host each glidein was last seen on, by ID.
	where map[string]string
}

var _ glidein.Site = (*Site)(nil)

// New returns the site cfg describes, after checking the configuration
// (not the hosts: see Check). It connects to nothing.
func New(cfg Config) (*Site, error) {
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("ssh site: no hosts")
	}
	s := &Site{now: time.Now, reserved: map[string]reservation{}, where: map[string]string{}}
	seen := map[string]int{}
	for i, entry := range cfg.Hosts {
		login, addr, err := parseHost(entry)
		if err != nil {
			return nil, fmt.Errorf("ssh site: hosts[%d]: %w", i, err)
		}
		if j, ok := seen[addr]; ok {
			return nil, fmt.Errorf("ssh site: hosts[%d] %q: %s is listed twice (hosts[%d] %q): a host is known by its address, and takes one user", i, entry, addr, j, cfg.Hosts[j])
		}
		seen[addr] = i
		s.hosts = append(s.hosts, &host{addr: addr, user: login, key: hostKey(addr), verified: map[string]bool{}})
	}
	if cfg.User == "" && slices.ContainsFunc(s.hosts, func(h *host) bool { return h.user == "" }) {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("ssh site: no user given, and the current one is unknown: %w", err)
		}
		cfg.User = u.Username
	}
	for _, h := range s.hosts {
		if h.user == "" {
			h.user = cfg.User
		}
	}
	if cfg.KnownHosts == "" {
		return nil, errors.New("ssh site: known_hosts: a known_hosts file is required: hosts are never trusted on first use")
	}
	// Read here for the site's own errors; each host's connection
	// (remote.SSH) reads them again.
	if _, err := knownhosts.New(cfg.KnownHosts); err != nil {
		return nil, fmt.Errorf("ssh site: known_hosts: %w", err)
	}
	switch {
	case cfg.KeyFile != "":
		pem, err := os.ReadFile(cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("ssh site: key: %w", err)
		}
		_, err = xssh.ParsePrivateKey(pem)
		var pm *xssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Errorf("ssh site: key %s is protected by a passphrase: load it into an SSH agent and leave the key file empty", cfg.KeyFile)
		}
		if err != nil {
			return nil, fmt.Errorf("ssh site: key %s: %w", cfg.KeyFile, err)
		}
	default:
		if cfg.AgentSocket == "" {
			cfg.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
		}
		if cfg.AgentSocket == "" {
			return nil, errors.New("ssh site: no key file, and no SSH agent (SSH_AUTH_SOCK is not set)")
		}
	}
	if cfg.BaseDir == "" {
		cfg.BaseDir = DefaultBaseDir
	}
	if strings.ContainsAny(cfg.BaseDir, "\x00\n") {
		return nil, fmt.Errorf("ssh site: base directory %q: no NUL or newline allowed", cfg.BaseDir)
	}
	switch {
	case cfg.Slots == 0:
		cfg.Slots = 1
	case cfg.Slots < 0:
		return nil, fmt.Errorf("ssh site: slots %d: want at least 1", cfg.Slots)
	}
	durations := []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"connect timeout", &cfg.ConnectTimeout, DefaultConnectTimeout},
		{"default lifetime", &cfg.DefaultLifetime, DefaultLifetime},
		{"kill grace", &cfg.KillGrace, DefaultKillGrace},
	}
	for _, d := range durations {
		switch {
		case *d.d == 0:
			*d.d = d.def
		case *d.d < 0:
			return nil, fmt.Errorf("ssh site: %s %s: must not be negative", d.name, *d.d)
		}
	}
	s.cfg = cfg
	return s, nil
}

// Kind returns "ssh".
func (s *Site) Kind() string { return "ssh" }

// OnThisMachine implements glidein.Local: whether every host is a
// loopback address (or localhost), this machine.
func (s *Site) OnThisMachine() bool {
	for _, h := range s.hosts {
		host, _, err := net.SplitHostPort(h.addr)
		if err != nil || !glidein.IsLoopbackHost(host) {
			return false
		}
	}
	return len(s.hosts) > 0
}

// Describe implements glidein.Describer: the site's Config as JSON.
func (s *Site) Describe() (json.RawMessage, error) { return json.Marshal(s.cfg) }

// Close closes the site's connections.
func (s *Site) Close() error {
	for _, h := range s.hosts {
		h.close()
	}
	return nil
}

// Check connects to every host, checking its key, its architecture
// against the binary's, its commands and that the base directory is
// writable. Its error names every host that is not fit.
func (s *Site) Check(ctx context.Context) error {
	var want arch
	var err error
	if s.cfg.Binary != "" {
		var b exe
		b, err = s.bins.get(s.cfg.Binary)
		want = b.Arch
	} else {
		want, err = hostArch()
	}
	if err != nil {
		return fmt.Errorf("ssh site: %w", err)
	}
	errs := make([]error, len(s.hosts))
	var wg sync.WaitGroup
	for i, h := range s.hosts {
		wg.Go(func() {
			if _, err := s.run(ctx, h, "check", checkScript, nil, s.cfg.BaseDir, h.key); err != nil {
				errs[i] = err
				return
			}
			l, err := s.listHost(ctx, h, glidein.IDPrefix)
			if err != nil {
				errs[i] = err
				return
			}
			if !want.fits(l.OS, l.Machine) {
				errs[i] = h.errorf("it is %s %s; the binary is %s", l.OS, l.Machine, want.Name)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// listHost lists the glideins of one host whose ID starts with prefix.
func (s *Site) listHost(ctx context.Context, h *host, prefix string) (listing, error) {
	out, err := s.run(ctx, h, "list", listScript, nil, s.cfg.BaseDir, h.key, prefix)
	if err != nil {
		return listing{}, err
	}
	l, err := parseListing(out)
	if err != nil {
		return listing{}, h.errorf("%w", err)
	}
	return l, nil
}

// glideins returns the glideins of a listing, judged.
func (s *Site) glideins(h *host, l listing) []glidein.Glidein {
	now := s.now()
	var gs []glidein.Glidein
	for _, e := range l.Glideins {
		g := glidein.Glidein{ID: e.Name, Host: h.addr}
		if validID(e.Name) != nil {
			continue
		}
		if e.NoMarker {
			g.State, g.Reason = glidein.Failed, "no marker file: its submission was interrupted"
			if now.Sub(e.Made) < startGrace {
				g.State, g.Reason = glidein.Queued, "being submitted"
			}
			gs = append(gs, g)
			continue
		}
		m, err := parseMarker(e.Marker)
		switch {
		case err != nil:
			g.State, g.Reason = glidein.Failed, "unreadable marker file: "+err.Error()
		case m.ID != e.Name:
			g.State, g.Reason = glidein.Failed, fmt.Sprintf("its marker file names %s", m.ID)
		default:
			g.State, g.Reason = judge(m, l.BootID, l.Procs, now)
			if g.State == glidein.Failed && m.HasStatus && m.Status == glidein.ExitValidation {
				if why := validationDetail(e.Name, e.Status); why != "" {
					g.Reason += ": " + why
				}
			}
			g.Submitted, g.Started, g.Ended = m.Submitted, m.Started, m.Ended
			if m.SID != 0 {
				g.SiteID = h.addr + ":" + strconv.Itoa(m.SID)
			}
		}
		gs = append(gs, g)
	}
	return gs
}

// validationDetail is why the glidein id failed its validation, from
// the first of its status files (as the list script read them) that is
// its own and says so; "" when none does. The files come from the host,
// where anything the glidein ran may have written them: the message is
// made safe to show (glidein.SafeMessage).
func validationDetail(id string, files [][]byte) string {
	for _, data := range files {
		var st api.GlideinStatus
		if json.Unmarshal(data, &st) != nil {
			continue
		}
		if st.ID == id && st.Reason == glidein.ReasonValidation {
			if why := glidein.SafeMessage(st.Message); why != "" {
				return why
			}
		}
	}
	return ""
}

// survey lists every host in parallel.
type surveyed struct {
	h        *host
	l        listing
	glideins []glidein.Glidein
	err      error
}

func (s *Site) survey(ctx context.Context, prefix string) []surveyed {
	out := make([]surveyed, len(s.hosts))
	var wg sync.WaitGroup
	for i, h := range s.hosts {
		wg.Go(func() {
			l, err := s.listHost(ctx, h, prefix)
			out[i] = surveyed{h: h, l: l, err: err}
			if err == nil {
				out[i].glideins = s.glideins(h, l)
				s.mu.Lock()
				for _, g := range out[i].glideins {
					s.where[g.ID] = h.addr
				}
				s.mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// List reports the glideins of every host whose ID starts with prefix,
// sorted by ID. When a host cannot be listed, the error names it and the
// glideins of the other hosts are returned with it: a glidein missing
// from a List that failed may still run.
func (s *Site) List(ctx context.Context, prefix string) ([]glidein.Glidein, error) {
	if !validName(prefix, "-") {
		return nil, fmt.Errorf("ssh site: list prefix %q: only letters, digits and '-' are allowed", prefix)
	}
	if !strings.HasPrefix(prefix, glidein.IDPrefix) && !strings.HasPrefix(glidein.IDPrefix, prefix) {
		return nil, nil
	}
	if len(prefix) < len(glidein.IDPrefix) {
		prefix = glidein.IDPrefix
	}
	var all []glidein.Glidein
	var errs []error
	for _, r := range s.survey(ctx, prefix) {
		all = append(all, r.glideins...)
		errs = append(errs, r.err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	return all, errors.Join(errs...)
}

// checkRequest checks what Submit can check without a host.
func checkRequest(req glidein.Request) error {
	if err := validID(req.ID); err != nil {
		return err
	}
	if len(req.Files) > maxFiles {
		return fmt.Errorf("%d files: at most %d", len(req.Files), maxFiles)
	}
	for name, data := range req.Files {
		switch {
		case name == "" || name[0] == '.' || !validName(name, "._-"):
			return fmt.Errorf("file %q: a name of letters, digits, '.', '_' and '-' not starting with '.' is needed", name)
		case strings.HasPrefix(name, "glidein."):
			return fmt.Errorf("file %q: names starting with \"glidein.\" are the site's own", name)
		case int64(len(data)) > maxFileSize:
			return fmt.Errorf("file %q: %d bytes, at most %d", name, len(data), maxFileSize)
		}
	}
	for k := range req.Env {
		if k == "" || (k[0] >= '0' && k[0] <= '9') || !validName(k, "_") {
			return fmt.Errorf("environment variable %q: a name of letters, digits and '_' is needed", k)
		}
	}
	if req.Lifetime < 0 {
		return fmt.Errorf("lifetime %s: must not be negative", req.Lifetime)
	}
	return nil
}

// Submit starts one glidein on the least loaded host with a free slot
// and the binary's architecture. It refuses an ID any reachable host has
// (glidein.ErrDuplicate); it returns ErrFull when no host has room, and
// ErrArchitecture when no host could run the binary. A host that cannot
// be listed is not asked whether it has the ID: a caller that may have
// submitted it before must first List without an error.
func (s *Site) Submit(ctx context.Context, req glidein.Request) (glidein.Glidein, error) {
	if err := checkRequest(req); err != nil {
		return glidein.Glidein{}, fmt.Errorf("ssh site: submit: %w", err)
	}
	bin, err := s.bins.get(req.Binary)
	if err != nil {
		return glidein.Glidein{}, fmt.Errorf("ssh site: submit %s: %w", req.ID, err)
	}
	surveyed := time.Now()
	survey := s.survey(ctx, glidein.IDPrefix)
	for _, r := range survey {
		for _, g := range r.glideins {
			if g.ID == req.ID {
				return glidein.Glidein{}, fmt.Errorf("ssh site: submit %s: %w: on host %s (%s)", req.ID, glidein.ErrDuplicate, r.h.addr, g.State)
			}
		}
	}
	cands, why, reasons, err := s.candidates(req.ID, bin, survey, surveyed)
	if err != nil {
		return glidein.Glidein{}, err
	}
	var errs []error
	for _, c := range cands {
		if !s.reserve(req.ID, c) {
			reasons = append(reasons, fmt.Sprintf("ssh host %s was filled meanwhile", c.r.h.addr))
			why = ErrFull
			continue
		}
		g, created, err := s.submitOn(ctx, c.r.h, c.r.l, req, bin)
		s.release(req.ID, created)
		if created {
			s.mu.Lock()
			s.where[req.ID] = c.r.h.addr
			s.mu.Unlock()
		}
		if err == nil || created {
			return g, err
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) > 0 {
		return glidein.Glidein{}, fmt.Errorf("ssh site: submit %s: %w", req.ID, errors.Join(errs...))
	}
	if why == nil {
		return glidein.Glidein{}, fmt.Errorf("ssh site: submit %s: no host can be reached: %s", req.ID, strings.Join(reasons, "; "))
	}
	return glidein.Glidein{}, fmt.Errorf("ssh site: submit %s: %w: %s", req.ID, why, strings.Join(reasons, "; "))
}

// reservation is a glidein this site is submitting or submitted to a
// host. It counts against the host's slots until a survey that started
// after the submission ended, and so sees the glidein, replaces it.
type reservation struct {
	host string
	// done is when the submission ended; zero while it runs.
	done time.Time
}

// candidate is a host a glidein may go to.
type candidate struct {
	r surveyed
	// live are the IDs of the glideins it runs, as surveyed.
	live map[string]bool
}

// busy returns the IDs counted against c's slots. s.mu is held.
func (s *Site) busy(c candidate) map[string]bool {
	ids := maps.Clone(c.live)
	for id, r := range s.reserved {
		if r.host == c.r.h.addr {
			ids[id] = true
		}
	}
	return ids
}

// candidates returns the hosts a glidein may go to, least loaded first;
// reasons say why the others may not, and why is ErrFull when a host is
// full, else ErrArchitecture when a host has another architecture.
func (s *Site) candidates(id string, bin exe, survey []surveyed, surveyed time.Time) (cands []candidate, why error, reasons []string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for rid, r := range s.reserved {
		if !r.done.IsZero() && r.done.Before(surveyed) {
			delete(s.reserved, rid)
		}
	}
	if r, ok := s.reserved[id]; ok {
		return nil, nil, nil, fmt.Errorf("ssh site: submit %s: %w: submitted to host %s by this site", id, glidein.ErrDuplicate, r.host)
	}
	load := map[*host]int{}
	for _, r := range survey {
		if r.err != nil {
			reasons = append(reasons, r.err.Error())
			continue
		}
		if !bin.Arch.fits(r.l.OS, r.l.Machine) {
			reasons = append(reasons, fmt.Sprintf("ssh host %s is %s %s, the binary %s is %s", r.h.addr, r.l.OS, r.l.Machine, bin.Path, bin.Arch.Name))
			if why == nil {
				why = ErrArchitecture
			}
			continue
		}
		c := candidate{r: r, live: map[string]bool{}}
		for _, g := range r.glideins {
			if !g.State.Ended() {
				c.live[g.ID] = true
			}
		}
		n := len(s.busy(c))
		if n >= s.cfg.Slots {
			reasons = append(reasons, fmt.Sprintf("ssh host %s runs %d of %d glideins", r.h.addr, n, s.cfg.Slots))
			why = ErrFull
			continue
		}
		load[r.h] = n
		cands = append(cands, c)
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return load[a.r.h] - load[b.r.h] })
	return cands, why, reasons, nil
}

// reserve takes a slot of c for id, if it still has one.
func (s *Site) reserve(id string, c candidate) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.busy(c)) >= s.cfg.Slots {
		return false
	}
	s.reserved[id] = reservation{host: c.r.h.addr}
	return true
}

// release ends the reservation of id: it is kept, as done, when the
// glidein's directory was created.
func (s *Site) release(id string, created bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !created {
		delete(s.reserved, id)
		return
	}
	r := s.reserved[id]
	r.done = time.Now()
	s.reserved[id] = r
}

// submitOn starts the glidein on h, as listed in l; created says whether its directory
// was made, after which the submission is not tried elsewhere.
func (s *Site) submitOn(ctx context.Context, h *host, l listing, req glidein.Request, bin exe) (g glidein.Glidein, created bool, err error) {
	base := l.Base
	if !strings.HasPrefix(base, "/") {
		return g, false, h.errorf("base directory %q is not absolute on the host ($HOME unset?)", base)
	}
	if err := s.checkOnce(ctx, h); err != nil {
		return g, false, err
	}
	if err := s.ensureBinary(ctx, h, bin, slices.Contains(l.Binaries, bin.Sum)); err != nil {
		return g, false, err
	}
	lifetime := req.Lifetime
	if lifetime == 0 {
		lifetime = s.cfg.DefaultLifetime
	}
	lifetimeSec := max(int64((lifetime+time.Second-1)/time.Second), 1)
	now := s.now().UTC().Truncate(time.Second)
	m := marker{ID: req.ID, Host: h.addr, Submitted: now, Lifetime: time.Duration(lifetimeSec) * time.Second, Binary: bin.Sum}
	dir := base + "/hosts/" + h.key + "/" + req.ID
	var env bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		fmt.Fprintf(&env, "export %s=%s\n", k, shellQuote(req.Env[k]))
	}
	cmd := []string{shellQuote(base + "/bin/pondctl-" + bin.Sum)}
	for _, a := range req.Args {
		cmd = append(cmd, shellQuote(strings.ReplaceAll(a, "{dir}", dir)))
	}
	graceSec := max(int64((s.cfg.KillGrace+time.Second-1)/time.Second), 1)
	wrapper := wrapperScript(req.ID, lifetimeSec, graceSec, strings.Join(cmd, " "))
	// Until it starts, a failure leaves nothing behind.
	undo := func(err error) (glidein.Glidein, bool, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ConnectTimeout+s.cfg.KillGrace)
		defer cancel()
		if _, uerr := s.run(cctx, h, "remove "+req.ID, cancelScript, nil, s.cfg.BaseDir, h.key, req.ID, "0"); uerr != nil {
			return g, true, errors.Join(err, uerr)
		}
		return g, false, err
	}
	if _, err := s.run(ctx, h, "create "+req.ID, createScript, &env, s.cfg.BaseDir, h.key, req.ID, string(formatMarker(m)), wrapper); err != nil {
		var ee *exitError
		if errors.As(err, &ee) && ee.status == exitExists {
			return g, true, fmt.Errorf("ssh site: submit %s: %w: on host %s", req.ID, glidein.ErrDuplicate, h.addr)
		}
		return undo(err)
	}
	for _, name := range slices.Sorted(maps.Keys(req.Files)) {
		if _, err := s.run(ctx, h, "write "+req.ID+"/"+name, writeScript, bytes.NewReader(req.Files[name]), s.cfg.BaseDir, h.key, req.ID, name, "600"); err != nil {
			return undo(err)
		}
	}
	out, err := s.run(ctx, h, "start "+req.ID, startScript, nil, s.cfg.BaseDir, h.key, req.ID)
	g = glidein.Glidein{ID: req.ID, Host: h.addr, State: glidein.Queued, Submitted: now}
	if err != nil {
		return g, true, err
	}
	sid := strings.TrimSpace(string(out))
	if _, err := strconv.Atoi(sid); err != nil {
		return g, true, h.errorf("start %s: it printed %q, not its process", req.ID, out)
	}
	g.SiteID, g.State, g.Started = h.addr+":"+sid, glidein.Running, s.now().UTC()
	return g, true, nil
}

// checkOnce checks, the first time the site submits to h, that h has
// the commands the site runs and a writable base directory.
func (s *Site) checkOnce(ctx context.Context, h *host) error {
	h.binMu.Lock()
	defer h.binMu.Unlock()
	if h.checked {
		return nil
	}
	if _, err := s.run(ctx, h, "check", checkScript, nil, s.cfg.BaseDir, h.key); err != nil {
		return err
	}
	h.checked = true
	return nil
}

// ensureBinary copies the binary to the host unless it has it with the
// same checksum; listed says whether the host's listing showed it.
func (s *Site) ensureBinary(ctx context.Context, h *host, bin exe, listed bool) error {
	h.binMu.Lock()
	defer h.binMu.Unlock()
	if h.verified[bin.Sum] && listed {
		return nil
	}
	delete(h.verified, bin.Sum)
	out, err := s.run(ctx, h, "verify the binary", haveBinaryScript, nil, s.cfg.BaseDir, bin.Sum, "1")
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(out)) == bin.Sum {
		h.verified[bin.Sum] = true
		return nil
	}
	f, err := os.Open(bin.Path)
	if err != nil {
		return fmt.Errorf("binary: %w", err)
	}
	defer f.Close()
	if _, err := s.run(ctx, h, "copy the binary "+bin.Path, putBinaryScript, f, s.cfg.BaseDir, bin.Sum); err != nil {
		return err
	}
	h.verified[bin.Sum] = true
	return nil
}

// Cancel ends the glidein with this ID on whichever host has it (TERM,
// KILL after the grace period) and removes its directory; it asks the
// host the site last saw the glidein on first, the others only if it is
// not there. An ID no host has is not an error; an error says which host
// could not be asked.
func (s *Site) Cancel(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("ssh site: cancel: %w", err)
	}
	graceSec := strconv.FormatInt(max(int64((s.cfg.KillGrace+time.Second-1)/time.Second), 1), 10)
	cancel := func(h *host) (bool, error) {
		out, err := s.run(ctx, h, "cancel "+id, cancelScript, nil, s.cfg.BaseDir, h.key, id, graceSec)
		return err == nil && strings.TrimSpace(string(out)) == "cancelled", err
	}
	// The host it was last seen on first; the others only if it is not
	// there.
	hosts := s.hosts
	s.mu.Lock()
	addr, seen := s.where[id]
	s.mu.Unlock()
	if i := slices.IndexFunc(s.hosts, func(h *host) bool { return h.addr == addr }); seen && i >= 0 {
		ok, err := cancel(s.hosts[i])
		if err != nil {
			return fmt.Errorf("ssh site: cancel %s: %w", id, err)
		}
		hosts = slices.Delete(slices.Clone(s.hosts), i, i+1)
		if ok {
			hosts = nil
		}
	}
	found := make([]bool, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { found[i], errs[i] = cancel(h) })
	}
	wg.Wait()
	s.mu.Lock()
	if r := s.reserved[id]; !r.done.IsZero() {
		delete(s.reserved, id)
	}
	delete(s.where, id)
	s.mu.Unlock()
	if len(hosts) == 0 || slices.Contains(found, true) {
		return nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ssh site: cancel %s: %w", id, err)
	}
	return nil
}
