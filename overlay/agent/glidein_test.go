package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/knobs"
)

// fastCondor writes a configuration of quick negotiation and reports,
// plus extra lines, and returns its path.
func fastCondor(t *testing.T, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "condor_config")
	text := "NEGOTIATOR_INTERVAL = 1\nNEGOTIATOR_MIN_INTERVAL = 0\nUPDATE_INTERVAL = 1\nSTARTER_POLL_INTERVAL = 0.1s\nNUM_CPUS = 1\n" + extra
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startCM runs, in this process, the central manager of pool campus,
// without a startd: jobs run only on the glideins. cfg adds to its
// configuration.
func startCM(t *testing.T, cfg *Config) *Agent {
	t.Helper()
	if cfg == nil {
		cfg = &Config{}
	}
	cfg.Name, cfg.Role, cfg.Pool = "cm", "cm", "campus"
	cfg.ConfigFile = fastCondor(t, "DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR SCHEDD\n")
	return startAgents(t, cfg)[0]
}

// writeChecks writes a validation file and returns its path.
func writeChecks(t *testing.T, checks ...api.ValidationCheck) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("[")
	for i, c := range checks {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%s", mustJSON(t, c))
	}
	b.WriteString("]")
	path := filepath.Join(t.TempDir(), "validate.json")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runProcess runs the test binary as `pondctl agent` with args until it
// exits, and returns its exit code and output.
func runProcess(t *testing.T, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), execEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the agent did not exit within %s:\n%s", timeout, out.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func readStatus(t *testing.T, path string) *api.GlideinStatus {
	t.Helper()
	st, err := glidein.ReadStatus(path)
	if err != nil {
		t.Fatalf("status file: %v", err)
	}
	return st
}

// slotAds returns the machine ads cm's collector holds for the node
// name's slots.
func slotAds(t *testing.T, cm string, name string) []wire.Ad {
	t.Helper()
	ads, err := wire.NewCollector(cm, "").Query(context.Background(), &wire.QueryAdsRequest{Type: wire.TypeMachine,
		Constraint: fmt.Sprintf("Machine == %q || regexp(%q, Name)", name, "@"+name+"$")})
	if err != nil {
		t.Fatal(err)
	}
	return ads
}

// TestGlideinValidationFails runs glideins, as processes, whose validation
// fails: each exits with glidein.ExitValidation, says why on its standard
// error and in its status file (phase failed, reason validation, with a
// failed command's output), and never joins the pool: its central manager
// has no machine ad of it and the sea no member of that name.
func TestGlideinValidationFails(t *testing.T) {
	t.Parallel()
	cm := startCM(t, nil)
	for _, tc := range []struct {
		name   string
		pool   string
		host   string // -condor-host; the central manager when empty
		checks []api.ValidationCheck
		want   string
	}{
		{name: "failing command", checks: []api.ValidationCheck{{Type: api.CheckDisk, MinMB: 1},
			{Type: api.CheckCommand, Name: "scratch", Shell: "echo no scratch space on $POND_GLIDEIN_ID >&2; exit 7"}},
			want: "check scratch: exit status 7: no scratch space on pond-v1"},
		{name: "command past its timeout", checks: []api.ValidationCheck{{Type: api.CheckCommand, Name: "slow", Shell: "sleep 60", Timeout: "500ms"}},
			want: "check slow: did not end within 500ms"},
		{name: "too little memory", checks: []api.ValidationCheck{{Type: api.CheckMemory, MinMB: 1 << 40}},
			want: "check memory: "},
		{name: "central manager unreachable", host: closedAddr(t), checks: []api.ValidationCheck{{Type: api.CheckCentralManager, Timeout: "1s"}},
			want: "check central_manager: no answer in 1s"},
		{name: "central manager of another pool", pool: "other", checks: []api.ValidationCheck{{Type: api.CheckCentralManager, Timeout: "20s"}},
			want: `belongs to pool "campus", not "other"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "g")
			host, pool := or(tc.host, cm.APIAddr()), or(tc.pool, "campus")
			code, out := runProcess(t, time.Minute, "-name", "v1", "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-gossip-profile", "fast",
				"-insecure-api", "-data-dir", dir, "-join", cm.Sea().GossipAddr(), "-pool", pool, "-condor-host", host,
				"-glidein", "pond-v1", "-validate", writeChecks(t, tc.checks...))
			if code != glidein.ExitValidation || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want %d and %q in:\n%s", code, glidein.ExitValidation, tc.want, out)
			}
			st := readStatus(t, filepath.Join(dir, glidein.StatusFile))
			if st.ID != "pond-v1" || st.Phase != glidein.PhaseFailed || st.Reason != glidein.ReasonValidation ||
				!strings.Contains(st.Message, tc.want) || st.ExitCode == nil || *st.ExitCode != glidein.ExitValidation ||
				len(st.Checks) != len(tc.checks) || st.Checks[len(st.Checks)-1].OK {
				t.Fatalf("status %+v", st)
			}
			if _, err := os.Stat(filepath.Join(dir, api.InfoFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the glidein served its API: %v", err)
			}
			if ads := slotAds(t, cm.APIAddr(), "v1"); len(ads) != 0 {
				t.Errorf("the central manager has machine ads of the glidein: %v", ads)
			}
			for _, m := range cm.Sea().Members() {
				if m.Name == "v1" {
					t.Errorf("the glidein joined the sea: %+v", m)
				}
			}
		})
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestGlideinIdle runs a glidein process that validates against its
// central manager, shows itself as a glidein (tag, machine ad, /v1/self,
// status file) and, with no job to run, leaves the sea after its idle
// timeout and exits 0 with reason idle.
func TestGlideinIdle(t *testing.T) {
	t.Parallel()
	cm := startCM(t, nil)
	base := t.TempDir()
	checks := writeChecks(t, api.ValidationCheck{Type: api.CheckDisk, MinMB: 1}, api.ValidationCheck{Type: api.CheckCentralManager},
		api.ValidationCheck{Type: api.CheckArch, Allow: []string{"amd64", "arm64", "X86_64", "aarch64", "ppc64le", "s390x", "riscv64"}})
	began := time.Now()
	g := startAgent(t, base, "idler", "-pool", "campus", "-condor-host", cm.APIAddr(), "-join", cm.Sea().GossipAddr(),
		"-config", fastCondor(t, ""), "-glidein", "pond-idle-1", "-idle-timeout", "6s", "-lifetime", "1h", "-validate", checks)
	ctx := context.Background()
	// The API answers as soon as it listens, and the glidein runs once
	// the agent has started behind it.
	var self *api.Self
	waitFor(t, 10*time.Second, "the glidein to run", func() error {
		var err error
		if self, err = g.client.Self(ctx); err != nil {
			t.Fatal(err)
		}
		if st := self.Glidein; st != nil && st.Phase == glidein.PhaseValidating {
			return fmt.Errorf("phase %s", st.Phase)
		}
		return nil
	})
	if st := self.Glidein; st == nil || st.ID != "pond-idle-1" || st.Phase != glidein.PhaseRunning || len(st.Checks) != 3 ||
		!st.Checks[0].OK || !st.Checks[1].OK || !st.Checks[2].OK || st.IdleTimeout != 6*time.Second ||
		st.EndTime.Sub(began) > time.Hour+time.Minute || st.EndTime.Sub(began) < time.Hour || st.CentralManager != cm.APIAddr() {
		t.Fatalf("/v1/self glidein %+v", self.Glidein)
	}
	if self.Attributes["IsGlidein"] != true || self.Attributes["GlideinID"] != "pond-idle-1" || self.Tags[api.TagGlidein] != "pond-idle-1" {
		t.Errorf("attributes %v, tags %v", self.Attributes, self.Tags)
	}
	waitFor(t, 10*time.Second, "the central manager to see the glidein's tag", func() error {
		for _, m := range cm.Sea().Members() {
			if m.Name == "idler" && m.Tags[api.TagGlidein] == "pond-idle-1" {
				return nil
			}
		}
		return errors.New("not yet")
	})
	waitFor(t, 10*time.Second, "the glidein's slot in the collector", func() error {
		for _, ad := range slotAds(t, cm.APIAddr(), "idler") {
			if ad["IsGlidein"] == "true" && ad["GlideinID"] == `"pond-idle-1"` && ad["GlideinEndTime"] != "" {
				return nil
			}
		}
		return errors.New("no slot ad with IsGlidein and GlideinID")
	})
	if st := readStatus(t, filepath.Join(g.dir, glidein.StatusFile)); st.Phase != glidein.PhaseRunning {
		t.Errorf("status file phase %q while running", st.Phase)
	}
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the idle glidein did not exit")
	}
	took := time.Since(began)
	if g.exitCode() != 0 || took < 6*time.Second {
		t.Fatalf("exit code %d after %s, want 0 after its idle timeout of 6s", g.exitCode(), took)
	}
	st := readStatus(t, filepath.Join(g.dir, glidein.StatusFile))
	if st.Phase != glidein.PhaseEnded || st.Reason != glidein.ReasonIdle || st.ExitCode == nil || *st.ExitCode != 0 ||
		!strings.Contains(st.Message, "no slot claimed for 6s") {
		t.Fatalf("status %+v", st)
	}
	waitFor(t, 10*time.Second, "the glidein to have left", func() error {
		for _, m := range cm.Sea().Members() {
			if m.Name == "idler" && m.Status != api.StatusLeft {
				return fmt.Errorf("status %s", m.Status)
			}
		}
		return nil
	})
}

// TestGlideinCentralManagerGone kills a glidein's central manager (a
// process) with SIGKILL: the glidein, a process too, leaves after its
// central manager timeout, not before, with nothing else running, and
// exits 0 with reason central-manager-gone.
func TestGlideinCentralManagerGone(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	cm := startAgent(t, base, "cm", "-role", "cm", "-pool", "campus")
	g := startAgent(t, base, "orphan", "-pool", "campus", "-condor-host", cm.info.API, "-join", cm.info.Gossip,
		"-glidein", "pond-orphan", "-cm-timeout", "4s")
	waitFor(t, 10*time.Second, "the glidein to see its central manager", func() error {
		self, err := g.client.Self(context.Background())
		if err != nil || self.Glidein == nil || self.Glidein.CMLastSeen.IsZero() {
			return fmt.Errorf("%+v, %v", self, err)
		}
		return nil
	})
	cm.cmd.Process.Kill()
	killed := time.Now()
	select {
	case <-g.done:
	case <-time.After(40 * time.Second):
		t.Fatal("the glidein did not exit after its central manager was killed")
	}
	took := time.Since(killed)
	if g.exitCode() != 0 || took < 3*time.Second {
		t.Fatalf("exit code %d %s after the kill, want 0 after about the central manager timeout of 4s", g.exitCode(), took)
	}
	st := readStatus(t, filepath.Join(g.dir, glidein.StatusFile))
	if st.Phase != glidein.PhaseEnded || st.Reason != glidein.ReasonCMGone || !strings.Contains(st.Message, cm.info.API) ||
		st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
}

// glideinRun is a glidein agent running in this process.
type glideinRun struct {
	a    *Agent
	log  *syncBuffer
	done chan error
	// stop cancels Run's context, as a signal does.
	stop context.CancelFunc
}

// runGlideinAgent runs a glidein agent in this process with cfg, in the sea
// of cm, until it ends by itself or the test ends.
func runGlideinAgent(t *testing.T, cm *Agent, cfg *Config) *glideinRun {
	t.Helper()
	cfg.Bind, cfg.API, cfg.GossipProfile = "127.0.0.1:0", "127.0.0.1:0", "fast"
	cfg.DataDir, cfg.Pool, cfg.CondorHost = t.TempDir(), "campus", cm.APIAddr()
	cfg.Join = []string{cm.Sea().GossipAddr()}
	cfg.InsecureAPI = cfg.TrustedKeys == ""
	cfg.StatusFile = filepath.Join(cfg.DataDir, glidein.StatusFile)
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &glideinRun{log: &syncBuffer{}, done: make(chan error, 1), stop: cancel}
	a, err := New(ctx, cfg, slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r.a = a
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Error("the glidein did not stop")
		}
		if t.Failed() {
			t.Logf("log of the glidein:\n%s", r.log.String())
		}
	})
	return r
}

// wait waits until the glidein has ended by itself and returns Run's
// error.
func (r *glideinRun) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(timeout):
		t.Fatalf("the glidein did not end within %s", timeout)
		return nil
	}
}

// submitSleep queues a job that sleeps secs seconds at cm's schedd, with
// a user log, and returns the log's path.
func submitSleep(t *testing.T, cm *Agent, secs int) string {
	t.Helper()
	return submitJob(t, cm, "/bin/sleep", strconv.Itoa(secs))
}

// submitJob submits one job of cmd with args to cm's schedd, in a cluster
// of its own, and returns the path of its log.
func submitJob(t *testing.T, cm *Agent, cmd, args string) string {
	t.Helper()
	owner := "root"
	if u, err := user.Current(); err == nil {
		owner = u.Username
	}
	work := t.TempDir()
	os.Chmod(work, 0o777)
	logPath := filepath.Join(work, "job.log")
	sc := wire.NewSchedd(cm.APIAddr(), "")
	ctx := context.Background()
	nc, err := sc.NewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job := wire.Ad{"Owner": strconv.Quote(owner), "Cmd": strconv.Quote(cmd), "Arguments": strconv.Quote(args),
		"TransferExecutable": "false", "Iwd": strconv.Quote(work), "Out": `"/dev/null"`, "Err": `"/dev/null"`,
		"UserLog": strconv.Quote(logPath), "RequestMemory": "16", "RequestCpus": "1", "RequestDisk": "1024",
		"Requirements": "true", "JobUniverse": "5"}
	if _, err := sc.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{job}}); err != nil {
		t.Fatal(err)
	}
	return logPath
}

// jobStatus returns the status of cm's only job: in the queue, or in the
// history once it has left it (0: none).
func jobStatus(t *testing.T, cm *Agent) (status string, inQueue bool) {
	t.Helper()
	sc := wire.NewSchedd(cm.APIAddr(), "")
	q, err := sc.Queue(context.Background(), &wire.QueryJobsRequest{Projection: []string{"JobStatus"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(q) == 1 {
		return q[0].Ad["JobStatus"], true
	}
	h, err := sc.History(context.Background(), &wire.QueryJobsRequest{Projection: []string{"JobStatus"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(h) == 1 {
		return h[0].Ad["JobStatus"], false
	}
	return "0", false
}

// TestGlideinLifetimeDrains runs a glidein, in this process, whose
// lifetime ends while a job runs on it: it drains, and the job finishes
// if it fits before the end, or is evicted and handed back to its
// schedd, which requeues it; the glidein leaves and its Run returns nil,
// its status ended with reason lifetime and what the drain did. Its
// daemons know its end as POND_END_TIME.
func TestGlideinLifetimeDrains(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		sleep     int
		finished  int
		evicted   int
		wantJob   string // JobStatus afterwards
		wantQueue bool   // still queued afterwards
		wantEvent string // in the job's log
	}{
		{name: "a job that fits finishes", sleep: 12, finished: 1, wantJob: "4", wantEvent: "005 ("},
		{name: "a job that does not fit is handed back", sleep: 600, evicted: 1, wantJob: "1", wantQueue: true, wantEvent: "004 ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := startCM(t, nil)
			jobLog := submitSleep(t, cm, tc.sleep)
			// Draining starts 9s after the start; jobs may run until a
			// third of the grace before the end, 27s after it.
			started := time.Now()
			g := runGlideinAgent(t, cm, &Config{Name: "g", Role: "node", ConfigFile: fastCondor(t, ""), Glidein: "pond-life",
				Started: started, Lifetime: 36 * time.Second, Grace: 27 * time.Second, CMTimeout: time.Minute})
			end := started.Add(36 * time.Second)
			if got, _ := g.a.daemons.Master.Config().Get(knobs.EndTime); got != strconv.FormatInt(end.Unix(), 10) {
				t.Errorf("the daemons' %s = %q, want %d", knobs.EndTime, got, end.Unix())
			}
			waitFor(t, 9*time.Second, "the job to run on the glidein", func() error {
				if st, _ := jobStatus(t, cm); st != "2" {
					return fmt.Errorf("job status %s", st)
				}
				return nil
			})
			if err := g.wait(t, time.Minute); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if left := time.Until(end); left < 0 {
				t.Errorf("the glidein ended %s after its end", -left)
			}
			st := readStatus(t, g.a.cfg.StatusFile)
			if st.Phase != glidein.PhaseEnded || st.Reason != glidein.ReasonLifetime || st.ExitCode == nil || *st.ExitCode != 0 ||
				st.Drain == nil || st.Drain.Finished != tc.finished || st.Drain.Evicted != tc.evicted ||
				!strings.Contains(st.Message, "its lifetime of 36s ends") {
				t.Fatalf("status %+v, drain %+v", st, st.Drain)
			}
			waitFor(t, 20*time.Second, "the job's state after the drain", func() error {
				if got, queued := jobStatus(t, cm); got != tc.wantJob || queued != tc.wantQueue {
					return fmt.Errorf("job status %s, queued %v", got, queued)
				}
				return nil
			})
			data, _ := os.ReadFile(jobLog)
			if !strings.Contains(string(data), tc.wantEvent) {
				t.Errorf("the job's log has no event %q:\n%s", tc.wantEvent, data)
			}
		})
	}
}

// TestGlideinQuarantinedRetires runs a glidein that cannot start jobs: once
// its startd quarantines it as a black hole, the glidein retires at once
// (it does not wait for its idle timeout), with the reason in its status,
// so that whoever keeps the depth replaces it.
func TestGlideinQuarantinedRetires(t *testing.T) {
	t.Parallel()
	cm := startCM(t, nil)
	g := runGlideinAgent(t, cm, &Config{Name: "g", Role: "node", Glidein: "pond-blackhole",
		ConfigFile: fastCondor(t, "POND_BLACKHOLE_FAILURES = 2\n"),
		Started:    time.Now(), Lifetime: time.Hour, IdleTimeout: time.Hour, CMTimeout: time.Minute})
	// A file where its execute directory should be: it cannot start a
	// job, its own fault.
	var execute string
	waitFor(t, time.Minute, "the glidein's startd", func() error {
		m := regexp.MustCompile(`in the execute directory".* execute=(\S+)`).FindStringSubmatch(g.log.String())
		if m == nil {
			return errors.New("no execute directory in its log")
		}
		execute = m[1]
		return nil
	})
	if err := os.RemoveAll(execute); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(execute, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	submitJob(t, cm, "/bin/true", "")
	submitJob(t, cm, "/bin/true", "")
	if err := g.wait(t, time.Minute); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := readStatus(t, g.a.cfg.StatusFile)
	if st.Phase != glidein.PhaseEnded || st.Reason != glidein.ReasonQuarantined || st.ExitCode == nil || *st.ExitCode != 0 ||
		!strings.Contains(st.Message, "black hole") {
		t.Fatalf("status %+v", st)
	}
}

// TestGlideinTokenRefresh runs a glidein against a central manager that
// checks tokens, with a central manager timeout of 3s, and revokes the
// glidein's token: a glidein whose token file was refreshed in place
// first keeps reaching its central manager and stays; one left with the
// revoked token leaves as its central manager is gone to it.
func TestGlideinTokenRefresh(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		refresh bool
	}{
		{name: "refreshed", refresh: true},
		{name: "revoked only", refresh: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := mustKey(t)
			dir := t.TempDir()
			trusted := filepath.Join(dir, auth.TrustedKeysFile)
			if err := auth.WritePublicKeys(trusted, key.Public()); err != nil {
				t.Fatal(err)
			}
			mint := func(subject string) (string, string) {
				c := auth.Claims{Issuer: "sea-1", Subject: subject, Scopes: []auth.Scope{auth.Daemon, auth.SeaRead}, Expires: time.Now().Add(time.Hour)}
				c.ID = strconv.FormatInt(time.Now().UnixNano(), 36)
				tok, err := auth.Mint(key, c)
				if err != nil {
					t.Fatal(err)
				}
				return tok, c.ID
			}
			writeToken := func(path, tok string) {
				if err := os.WriteFile(path+".new", []byte(tok+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(path+".new", path); err != nil {
					t.Fatal(err)
				}
			}
			cmToken := filepath.Join(dir, "cm.token")
			tok, _ := mint("node/cm")
			writeToken(cmToken, tok)
			cm := startCM(t, &Config{TrustedKeys: trusted, TokenIssuer: "sea-1", TokenFile: cmToken})
			gToken := filepath.Join(dir, "g.token")
			first, firstID := mint("node/g")
			writeToken(gToken, first)
			g := runGlideinAgent(t, cm, &Config{Name: "g", Role: "node", Glidein: "pond-tok", CMTimeout: 3 * time.Second,
				TrustedKeys: trusted, TokenIssuer: "sea-1", TokenFile: gToken,
				Checks: []api.ValidationCheck{{Type: api.CheckCentralManager, Timeout: "5s"}}})
			if tc.refresh {
				second, _ := mint("node/g")
				writeToken(gToken, second)
			}
			if err := os.WriteFile(filepath.Join(dir, auth.RevokedFile), []byte(firstID+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-g.done:
				g.done <- err
				if tc.refresh {
					t.Fatalf("the glidein ended (Run: %v) though its token was refreshed", err)
				}
				st := readStatus(t, g.a.cfg.StatusFile)
				if st.Reason != glidein.ReasonCMGone || !strings.Contains(st.Message, "401") && !strings.Contains(strings.ToLower(st.Message), "revoked") {
					t.Fatalf("status %+v, want central-manager-gone because of the revoked token", st)
				}
			case <-time.After(10 * time.Second):
				if !tc.refresh {
					t.Fatal("the glidein with a revoked token did not leave")
				}
				st := g.a.glidein.Status()
				if st.Phase != glidein.PhaseRunning || time.Since(st.CMLastSeen) > 3*time.Second {
					t.Fatalf("status %+v, want running, its central manager seen in the last 3s", st)
				}
			}
		})
	}
}

// TestGlideinBadFlags checks that a glidein's flags and knobs with bad
// values stop the agent with exit code 1 and an error that names them,
// before it starts anything (no status file).
func TestGlideinBadFlags(t *testing.T) {
	base := t.TempDir()
	badChecks := filepath.Join(base, "bad.json")
	if err := os.WriteFile(badChecks, []byte(`[{"type":"disk"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	glide := []string{"-glidein", "pond-b1", "-pool", "campus", "-condor-host", "127.0.0.1:1"}
	for _, tc := range []struct {
		name   string
		args   []string
		config string
		want   string
	}{
		{name: "lifetime not a duration", args: append(glide, "-lifetime", "soon"), want: `-lifetime "soon": want a duration`},
		{name: "negative lifetime", args: append(glide, "-lifetime", "-5m"), want: `-lifetime "-5m": must not be negative`},
		{name: "idle timeout", args: append(glide, "-idle-timeout", "a while"), want: `-idle-timeout "a while": want a duration`},
		{name: "cm timeout", args: append(glide, "-cm-timeout", "5 minutes"), want: `-cm-timeout "5 minutes"`},
		{name: "grace", args: append(glide, "-grace", "x"), want: `-grace "x"`},
		{name: "grace as long as the life", args: append(glide, "-lifetime", "10m", "-grace", "10m"), want: "-grace 10m0s: not shorter than the glidein's life of 10m0s"},
		{name: "end time not a time", args: append(glide, "-end-time", "tomorrow"), want: `-end-time "tomorrow": want a time such as`},
		{name: "end time past", args: append(glide, "-end-time", "2001-01-01T00:00:00Z"), want: "the node's end has already passed"},
		{name: "bad id", args: []string{"-glidein", "pond g/1", "-pool", "campus", "-condor-host", "127.0.0.1:1"}, want: `-glidein "pond g/1": want 1 to 64 letters`},
		{name: "no pool", args: []string{"-glidein", "pond-b1", "-condor-host", "127.0.0.1:1"}, want: "-glidein pond-b1: name its pool with -pool"},
		{name: "no central manager", args: []string{"-glidein", "pond-b1", "-pool", "campus"}, want: "-glidein pond-b1: give the API address of the pool's central manager with -condor-host"},
		{name: "no validation file", args: append(glide, "-validate", filepath.Join(base, "none.json")), want: "-validate: open"},
		{name: "bad validation file", args: append(glide, "-validate", badChecks), want: "bad.json: check 1 (disk): min_mb"},
		{name: "a glidein's flag without -glidein", args: []string{"-idle-timeout", "5m"}, want: "-idle-timeout: only a glidein has it: give the glidein's ID with -glidein"},
		{name: "max jobs not a number", args: append(glide, "-max-jobs", "one"), want: `-max-jobs "one"`},
		{name: "negative max jobs", args: append(glide, "-max-jobs", "-1"), want: "-max-jobs -1: must not be negative (0 is no limit)"},
		{name: "bad max jobs knob", args: glide, config: "POND_GLIDEIN_MAX_JOBS = many\n", want: `POND_GLIDEIN_MAX_JOBS = "many"`},
		{name: "max jobs without -glidein", args: []string{"-max-jobs", "1"}, want: "-max-jobs: only a glidein has it"},
		{name: "a glidein's knob without -glidein", config: "POND_GLIDEIN_LIFETIME = 1h\n", want: "POND_GLIDEIN_LIFETIME: only a glidein has it"},
		{name: "bad knob", args: glide, config: "POND_GLIDEIN_IDLE_TIMEOUT = forever\n", want: `POND_GLIDEIN_IDLE_TIMEOUT = "forever": want a duration`},
		{name: "bad end time knob", args: glide, config: "POND_END_TIME = soon\n", want: `POND_END_TIME "soon": want a time`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			args := []string{"-name", "b", "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-data-dir", dir, "-insecure-api"}
			if tc.config != "" {
				path := filepath.Join(t.TempDir(), "condor_config")
				if err := os.WriteFile(path, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-config", path)
			}
			var log syncBuffer
			if code := Main(context.Background(), append(args, tc.args...), &log, &log, Logging{}); code != 1 || !strings.Contains(log.String(), tc.want) {
				t.Fatalf("exit %d, want 1 and an error containing %q:\n%s", code, tc.want, log.String())
			}
			if _, err := os.Stat(filepath.Join(dir, glidein.StatusFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a status file was written: %v", err)
			}
		})
	}
}

// TestGlideinSignal stops a glidein process with SIGINT, as a batch
// system cancelling it does (SIGTERM), and through POST /v1/leave: it
// leaves the sea, writes its status (ended, with the reason) and exits 0.
func TestGlideinSignal(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	cm := startCM(t, nil)
	for _, tc := range []struct {
		name   string
		stop   func(p *proc) error
		reason string
	}{
		{name: "signal", stop: func(p *proc) error { return p.cmd.Process.Signal(os.Interrupt) }, reason: glidein.ReasonSignal},
		{name: "leave", stop: func(p *proc) error { return p.client.Leave(context.Background()) }, reason: glidein.ReasonLeave},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startAgent(t, base, tc.name, "-pool", "campus", "-condor-host", cm.APIAddr(), "-join", cm.Sea().GossipAddr(), "-glidein", "pond-"+tc.name)
			if err := tc.stop(g); err != nil {
				t.Fatal(err)
			}
			select {
			case <-g.done:
			case <-time.After(30 * time.Second):
				t.Fatal("the glidein did not exit")
			}
			st := readStatus(t, filepath.Join(g.dir, glidein.StatusFile))
			if g.exitCode() != 0 || st.Phase != glidein.PhaseEnded || st.Reason != tc.reason || st.ExitCode == nil || *st.ExitCode != 0 {
				t.Fatalf("exit %d, status %+v", g.exitCode(), st)
			}
			waitFor(t, 10*time.Second, "the glidein to have left", func() error {
				for _, m := range cm.Sea().Members() {
					if m.Name == tc.name && m.Status != api.StatusLeft {
						return fmt.Errorf("status %s", m.Status)
					}
				}
				return nil
			})
		})
	}
}

// TestGlideinSignalWhileDraining signals a glidein, in this process, while
// it drains for its end with a job that would run until then: the job is
// evicted at once and handed back, rather than at the end, and the
// glidein ends with the reason it drained for.
func TestGlideinSignalWhileDraining(t *testing.T) {
	t.Parallel()
	cm := startCM(t, nil)
	submitSleep(t, cm, 600)
	// Draining starts 6s after the start; the job could run until 42s.
	g := runGlideinAgent(t, cm, &Config{Name: "g", Role: "node", ConfigFile: fastCondor(t, ""), Glidein: "pond-sigdrain",
		Lifetime: 60 * time.Second, Grace: 54 * time.Second, CMTimeout: time.Minute})
	waitFor(t, 6*time.Second, "the job to run on the glidein", func() error {
		if st, _ := jobStatus(t, cm); st != "2" {
			return fmt.Errorf("job status %s", st)
		}
		return nil
	})
	waitFor(t, 15*time.Second, "the glidein to drain", func() error {
		if st := g.a.glidein.Status(); st.Phase != glidein.PhaseDraining {
			return fmt.Errorf("phase %s", st.Phase)
		}
		return nil
	})
	g.stop()
	signalled := time.Now()
	if err := g.wait(t, time.Minute); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(signalled); took > 15*time.Second {
		t.Errorf("the glidein took %s to end after the signal", took)
	}
	st := readStatus(t, g.a.cfg.StatusFile)
	if st.Phase != glidein.PhaseEnded || st.Reason != glidein.ReasonLifetime || st.Drain == nil || st.Drain.Evicted != 1 {
		t.Fatalf("status %+v, drain %+v", st, st.Drain)
	}
	waitFor(t, 20*time.Second, "the job to be requeued", func() error {
		if got, queued := jobStatus(t, cm); got != "1" || !queued {
			return fmt.Errorf("job status %s, queued %v", got, queued)
		}
		return nil
	})
}

// TestGlideinEndTime runs a glidein, in this process, whose batch job ends
// before its lifetime: it drains at the end time minus its grace, with
// reason end-time, and its daemons know that end as POND_END_TIME.
func TestGlideinEndTime(t *testing.T) {
	t.Parallel()
	cm := startCM(t, nil)
	end := time.Now().Add(9 * time.Second).Truncate(time.Second)
	g := runGlideinAgent(t, cm, &Config{Name: "g", Role: "node", Glidein: "pond-end", EndTime: end, Lifetime: time.Hour, Grace: 4 * time.Second})
	if got, _ := g.a.daemons.Master.Config().Get(knobs.EndTime); got != strconv.FormatInt(end.Unix(), 10) {
		t.Errorf("the daemons' %s = %q, want %d", knobs.EndTime, got, end.Unix())
	}
	// The startd stops taking jobs when the glidein drains, not
	// POND_END_GRACE's default of 5m before its end (from its start).
	if got, _ := g.a.daemons.Master.Config().Get(knobs.EndGrace); got != "4" {
		t.Errorf("the daemons' %s = %q, want 4 (the glidein's grace)", knobs.EndGrace, got)
	}
	if sd := g.a.startd(); sd != nil && !sd.EndTime().Equal(end) {
		t.Errorf("the startd's end %v, want %v", sd.EndTime(), end)
	}
	if err := g.wait(t, 30*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if now := time.Now(); now.Before(end.Add(-4*time.Second)) || now.After(end) {
		t.Errorf("the glidein ended at %s, want between its drain time and its end %s", now.Format(time.RFC3339Nano), end.Format(time.RFC3339))
	}
	st := readStatus(t, g.a.cfg.StatusFile)
	if st.Phase != glidein.PhaseEnded || st.Reason != glidein.ReasonEndTime || !st.EndTime.Equal(end) ||
		!strings.Contains(st.Message, "the batch job ends at "+end.UTC().Format(time.RFC3339)) {
		t.Fatalf("status %+v", st)
	}
}

// TestGlideinKnobs checks that a glidein is configured by its knobs as by
// its flags, the flags winning.
func TestGlideinKnobs(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "condor_config")
	checks := writeChecks(t, api.ValidationCheck{Type: api.CheckCPUs, Min: 1})
	end := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	text := fmt.Sprintf("CONDOR_HOST = 127.0.0.1:9618\nPOND_POOL = campus\nPOND_GLIDEIN = pond-k1\nPOND_GLIDEIN_LIFETIME = 3h\nPOND_END_TIME = %d\n"+
		"POND_GLIDEIN_GRACE = 90\nPOND_GLIDEIN_IDLE_TIMEOUT = 10m\nPOND_GLIDEIN_VALIDATE = %s\nPOND_GLIDEIN_STATUS_FILE = %s\n",
		end.Unix(), checks, filepath.Join(dir, "st.json"))
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(c *Config) string
	}{
		{name: "knobs", check: func(c *Config) string {
			if c.Glidein != "pond-k1" || c.Lifetime != 3*time.Hour || !c.EndTime.Equal(end) || c.Grace != 90*time.Second ||
				c.IdleTimeout != 10*time.Minute || c.CMTimeout != 5*time.Minute || len(c.Checks) != 1 || c.StatusFile != filepath.Join(dir, "st.json") {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}},
		{name: "flags win", args: []string{"-glidein", "pond-f1", "-lifetime", "1h", "-end-time", end.Add(time.Hour).Format(time.RFC3339),
			"-idle-timeout", "0", "-cm-timeout", "30s", "-status-file", filepath.Join(dir, "f.json")}, check: func(c *Config) string {
			if c.Glidein != "pond-f1" || c.Lifetime != time.Hour || !c.EndTime.Equal(end.Add(time.Hour)) || c.IdleTimeout != 0 ||
				c.CMTimeout != 30*time.Second || c.StatusFile != filepath.Join(dir, "f.json") {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseArgs(append([]string{"-config", conf, "-data-dir", dir}, tc.args...), &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if bad := tc.check(cfg); bad != "" {
				t.Fatalf("config %s", bad)
			}
		})
	}
}

// TestGlideinEndFromEnvironment: a glidein given neither -end-time nor
// POND_END_TIME takes its end from POND_GLIDEIN_END, which its site (the
// Slurm job's script) sets; -end-time wins over it; an agent that is no
// glidein ignores it; a bad value is an error that names the variable.
func TestGlideinEndFromEnvironment(t *testing.T) {
	end := time.Now().Add(time.Hour).Truncate(time.Second)
	glide := []string{"-name", "g", "-data-dir", t.TempDir(), "-glidein", "pond-env", "-pool", "campus", "-condor-host", "127.0.0.1:1"}
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want time.Time
		err  string
	}{
		{name: "from the environment", env: strconv.FormatInt(end.Unix(), 10), args: glide, want: end},
		{name: "the flag wins", env: "1", args: append(slices.Clone(glide), "-end-time", strconv.FormatInt(end.Unix()+60, 10)), want: end.Add(time.Minute)},
		{name: "not a glidein", env: "soon", args: []string{"-name", "n"}},
		{name: "bad value", env: "soon", args: glide, err: glidein.EndEnv + ` "soon": want a time`},
		{name: "unset", args: glide},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(glidein.EndEnv, tc.env)
			} else {
				t.Setenv(glidein.EndEnv, "")
				os.Unsetenv(glidein.EndEnv)
			}
			cfg, err := ParseArgs(tc.args, io.Discard)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.EndTime.Equal(tc.want) {
				t.Errorf("end time %v, want %v", cfg.EndTime, tc.want)
			}
		})
	}
}

// TestGlideinMaxJobs runs two glidein processes of -max-jobs 1 one after
// the other, with two jobs of one owner queued: the first runs one job
// and leaves (reason max-jobs, exit 0) although the schedd has a second
// job for its claim, which stays idle, and the second runs that one. Each
// job ends once.
func TestGlideinMaxJobs(t *testing.T) {
	t.Parallel()
	cm := startCM(t, nil)
	base := t.TempDir()
	logs := []string{submitSleep(t, cm, 1), submitSleep(t, cm, 1)}
	queue := func() (running, idle, done int) {
		t.Helper()
		sc := wire.NewSchedd(cm.APIAddr(), "")
		q, err := sc.Queue(context.Background(), &wire.QueryJobsRequest{Projection: []string{"JobStatus"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range q {
			switch j.Ad["JobStatus"] {
			case "1":
				idle++
			case "2":
				running++
			}
		}
		h, err := sc.History(context.Background(), &wire.QueryJobsRequest{Projection: []string{"JobStatus"}})
		if err != nil {
			t.Fatal(err)
		}
		return running, idle, len(h)
	}
	for i, name := range []string{"one", "two"} {
		g := startAgent(t, base, name, "-pool", "campus", "-condor-host", cm.APIAddr(), "-join", cm.Sea().GossipAddr(),
			"-config", fastCondor(t, ""), "-glidein", "pond-max-"+name, "-max-jobs", "1", "-idle-timeout", "1h", "-lifetime", "1h")
		select {
		case <-g.done:
		case <-time.After(time.Minute):
			t.Fatalf("glidein %s did not leave after its job", name)
		}
		st := readStatus(t, filepath.Join(g.dir, glidein.StatusFile))
		if g.exitCode() != 0 || st.Phase != glidein.PhaseEnded || st.Reason != glidein.ReasonMaxJobs || st.MaxJobs != 1 ||
			!strings.Contains(st.Message, "ran the 1 jobs") || st.Drain == nil || st.Drain.Evicted != 0 {
			t.Fatalf("glidein %s: exit %d, status %+v, drain %+v", name, g.exitCode(), st, st.Drain)
		}
		waitFor(t, 10*time.Second, "the queue after glidein "+name, func() error {
			if running, idle, done := queue(); running != 0 || idle != 1-i || done != i+1 {
				return fmt.Errorf("%d running, %d idle, %d done; want 0, %d, %d", running, idle, done, 1-i, i+1)
			}
			return nil
		})
	}
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(data), "\n005 ("); n != 1 {
			t.Errorf("%s: %d terminations, want 1:\n%s", l, n, data)
		}
	}
}
