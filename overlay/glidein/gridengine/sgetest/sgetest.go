// Package sgetest starts a real Grid Engine cell on this machine for
// tests: Debian's sge_qmaster and sge_execd (Son of Grid Engine), from a
// cell written into a temporary directory, on ports of their own, so that
// cells run side by side without touching the machine's own Grid Engine.
//
// A test calls Shared for the package's one cell, or Start for a cell of
// its own; the cell is up (its queue takes jobs) when it returns. The
// Grid Engine commands reach it through the environment Env returns
// (SGE_ROOT, SGE_CELL, SGE_QMASTER_PORT, SGE_EXECD_PORT), or through Run:
//
//	c := sgetest.Shared(t)
//	out := c.Run(t, "qstat", "-f")
//	site, err := gridengine.New(gridengine.Config{Env: c.Env(), WorkDir: t.TempDir()})
//
// The cell has one execution host, this machine, and one queue (Queue)
// of Options.Slots slots, which takes jobs whatever the machine's load;
// the scheduler runs every second, so a job starts within about a
// second. Jobs run as the user who submits them, root included (min_uid
// 0), in the parallel environments make, mpi and smp. Finished jobs are
// written to the accounting file (qacct) within a second. Each cell has
// its own range of the additional group IDs its execution daemon tracks
// jobs' processes by, and its own directory for the jobs' TMPDIR (named
// by job number and queue, the same in every cell), so that the jobs of
// cells side by side never meet.
//
// Starting a cell needs root (sge_execd runs jobs as their owners) and
// Debian's gridengine-master, gridengine-exec and gridengine-client.
// Without them the test is skipped with a message that says what is
// missing, unless the environment variable CI is set, in which case it
// fails. The package's TestMain stops the shared cell with StopShared.
package sgetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/overlay/glidein/batch/batchtest"
)

// Commands are the programs a cell needs.
var Commands = []string{"sge_qmaster", "sge_execd", "qsub", "qstat", "qdel", "qacct", "qconf"}

// Debian's installation, which a cell links to and initialises from.
const (
	debianRoot  = "/var/lib/gridengine"
	spoolinit   = "/usr/lib/gridengine/spoolinit"
	spooldefs   = "/usr/lib/gridengine/spooldefaults"
	defaultConf = "/usr/share/gridengine/default-configuration"
	resources   = "/usr/share/gridengine/util/resources"
)

// CellName is the cell's name (SGE_CELL).
const CellName = "pond"

// Queue is the cell's one cluster queue.
const Queue = "pond.q"

// Options shape a cell. The zero value has 8 slots.
type Options struct {
	// Slots is how many jobs the queue runs at once. Default 8.
	Slots int
}

// Cell is a running Grid Engine cell.
type Cell struct {
	// Dir holds the cell's files: SGE_ROOT, spool directories, logs.
	Dir string
	// Root is SGE_ROOT; Root/CellName/common holds the cell's files.
	Root string
	// Host is the execution host's name (this machine's).
	Host string
	// QmasterPort and ExecdPort are the daemons' ports.
	QmasterPort, ExecdPort int
	// Startup is how long Start took.
	Startup time.Duration

	procs []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// Available reports why a cell cannot be started here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("a Grid Engine cell needs root (sge_execd runs jobs as their owners)")
	}
	var missing []string
	for _, name := range Commands {
		if _, err := exec.LookPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	for _, p := range []string{spoolinit, spooldefs, defaultConf, debianRoot} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s not found: install Debian's gridengine-master, gridengine-exec and gridengine-client (.ci/run does)", strings.Join(missing, ", "))
	}
	return nil
}

// Require skips the test when a cell cannot be started here, or fails it
// when the environment variable CI is set.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		testenv.SkipOrFailf(t, "sgetest: %v", err)
	}
}

// Start starts a cell of the test's own and waits until its queue takes
// jobs. It stops the cell when the test ends.
func Start(t testing.TB, opts Options) *Cell {
	t.Helper()
	Require(t)
	c, err := start(opts)
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("sgetest: logs:\n%s", c.Logs())
			}
			c.stop()
		})
	}
	if err != nil {
		t.Fatalf("sgetest: %v", err)
	}
	t.Logf("sgetest: cell in %s up in %v", c.Dir, c.Startup.Round(time.Millisecond))
	return c
}

var shared struct {
	once sync.Once
	c    *Cell
	err  error
}

// Shared returns the package's one cell, started by the first test that
// asks for it. Tests share its queue: each finds its jobs by their names.
// The package's TestMain calls StopShared after m.Run.
func Shared(t testing.TB) *Cell {
	t.Helper()
	Require(t)
	shared.once.Do(func() {
		shared.c, shared.err = start(Options{Slots: 16})
		if shared.err == nil {
			t.Logf("sgetest: cell in %s up in %v, shared by the package's tests", shared.c.Dir, shared.c.Startup.Round(time.Millisecond))
		}
	})
	if shared.err != nil {
		t.Fatalf("sgetest: the shared cell: %v", shared.err)
	}
	return shared.c
}

// StopShared stops the package's shared cell, if a test started it.
func StopShared() {
	if shared.c != nil {
		shared.c.stop()
	}
}

// start makes and starts a cell. The cell is returned, for stop, once its
// directory exists, even with an error.
func start(opts Options) (*Cell, error) {
	if opts.Slots == 0 {
		opts.Slots = 8
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sgetest")
	if err != nil {
		return nil, err
	}
	c := &Cell{Dir: dir, Root: filepath.Join(dir, "root"), Host: host}
	// The jobs' owners read the cell's files.
	if err := os.Chmod(dir, 0o755); err != nil {
		return c, err
	}
	ports, err := batchtest.FreePorts(2)
	if err != nil {
		return c, err
	}
	c.QmasterPort, c.ExecdPort = ports[0], ports[1]
	began := time.Now()
	if err := c.writeFiles(); err != nil {
		return c, err
	}
	if err := c.spawn("qmaster", "sge_qmaster"); err != nil {
		return c, err
	}
	if err := batchtest.WaitFor(30*time.Second, 100*time.Millisecond, func() bool { return c.command(context.Background(), "qconf", "-sh").Run() == nil }); err != nil {
		return c, fmt.Errorf("sge_qmaster did not answer within 30 s: %w\n%s", err, c.Logs())
	}
	if err := c.configure(opts); err != nil {
		return c, err
	}
	if err := c.spawn("execd", "sge_execd"); err != nil {
		return c, err
	}
	// The queue instance takes jobs once the execution host reported.
	if err := batchtest.WaitFor(30*time.Second, 100*time.Millisecond, func() bool {
		out, err := c.command(context.Background(), "qstat", "-f", "-q", Queue).Output()
		return err == nil && bytes.Contains(out, []byte(Queue+"@")) && !queueUnavailable(out)
	}); err != nil {
		return c, fmt.Errorf("the queue took no jobs within 30 s: %w\n%s", err, c.Logs())
	}
	c.Startup = time.Since(began)
	return c, nil
}

// queueUnavailable reports whether qstat -f shows the queue instance in
// a state that takes no jobs: u(nknown), a(larm), d(isabled), E(rror).
func queueUnavailable(qstat []byte) bool {
	for _, line := range strings.Split(string(qstat), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && strings.HasPrefix(f[0], Queue+"@") {
			return strings.ContainsAny(f[5], "uadEsSC")
		}
	}
	return false
}

// writeFiles writes SGE_ROOT (links to Debian's installation and the
// cell's common directory) and initialises the qmaster's spool, as
// Debian's init_cluster does.
func (c *Cell) writeFiles() error {
	common := filepath.Join(c.Root, CellName, "common")
	for _, d := range []string{common, c.path("spool", "qmaster"), c.path("spool", "execd"), c.path("spool", "db"), c.path("log"), c.path("tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(c.path("tmp"), 0o1777); err != nil {
		return err
	}
	for _, n := range []string{"bin", "lib", "utilbin", "util"} {
		if err := os.Symlink(filepath.Join(debianRoot, n), filepath.Join(c.Root, n)); err != nil {
			return err
		}
	}
	bootstrap := fmt.Sprintf(`admin_user none
default_domain none
ignore_fqdn true
spooling_method berkeleydb
spooling_lib libspoolb
spooling_params %s
binary_path /usr/sbin
qmaster_spool_dir %s
security_mode none
listener_threads 2
worker_threads 2
scheduler_threads 1
`, c.path("spool", "db"), c.path("spool", "qmaster"))
	files := map[string]string{
		"bootstrap":   bootstrap,
		"act_qmaster": c.Host + "\n",
		// This host's name resolves to a loopback address, whose name is
		// localhost: the qmaster takes it for this host.
		"host_aliases": c.Host + " localhost\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(common, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	conf, err := os.ReadFile(defaultConf)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, line := range strings.Split(string(conf), "\n") {
		switch f := strings.Fields(line); {
		case len(f) == 0:
		case f[0] == "execd_spool_dir":
			line = "execd_spool_dir " + c.path("spool", "execd")
		case f[0] == "min_uid" || f[0] == "min_gid":
			line = f[0] + " 0"
		case f[0] == "reporting_params":
			line = "reporting_params accounting=true reporting=false flush_time=00:00:01 joblog=false sharelog=00:00:00 accounting_flush_time=00:00:00"
		case f[0] == "load_report_time":
			line = "load_report_time 00:00:05"
		case f[0] == "mailer":
			line = "mailer /bin/true"
		case f[0] == "gid_range":
			// The execution daemon finds, and kills, a job's processes
			// by an additional group ID from this range: cells side by
			// side each have their own.
			base := 20000 + (c.QmasterPort%4000)*10
			line = fmt.Sprintf("gid_range %d-%d", base, base+9)
		}
		b.WriteString(line + "\n")
	}
	if err := os.WriteFile(c.path("configuration"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{spoolinit, "berkeleydb", "libspoolb", c.path("spool", "db"), "init"},
		{spooldefs, "configuration", c.path("configuration")},
		{spooldefs, "complexes", filepath.Join(resources, "centry")},
		{spooldefs, "usersets", filepath.Join(resources, "usersets")},
		{spooldefs, "managers", "root"},
	} {
		if out, err := c.command(context.Background(), args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// configure adds this host as execution and submit host, the parallel
// environments, a scheduler that runs every second, and the queue.
func (c *Cell) configure(opts Options) error {
	exechost := fmt.Sprintf("hostname %s\nload_scaling NONE\ncomplex_values NONE\nuser_lists NONE\nxuser_lists NONE\nprojects NONE\nxprojects NONE\nusage_scaling NONE\nreport_variables NONE\n", c.Host)
	if err := os.WriteFile(c.path("exechost"), []byte(exechost), 0o644); err != nil {
		return err
	}
	steps := [][]string{{"-Ae", c.path("exechost")}, {"-as", c.Host}}
	pes, _ := filepath.Glob(filepath.Join(resources, "pe", "*"))
	for _, pe := range pes {
		steps = append(steps, []string{"-Ap", pe})
	}
	for _, args := range steps {
		if err := c.qconf(nil, args...); err != nil {
			return err
		}
	}
	sconf, err := c.command(context.Background(), "qconf", "-ssconf").Output()
	if err != nil {
		return fmt.Errorf("qconf -ssconf: %w", err)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(sconf), "\n") {
		switch f := strings.Fields(line); {
		case len(f) == 0:
		case f[0] == "schedule_interval":
			line = "schedule_interval 0:0:1"
		case f[0] == "flush_submit_sec" || f[0] == "flush_finish_sec":
			line = f[0] + " 1"
		case f[0] == "job_load_adjustments":
			line = "job_load_adjustments NONE"
		case f[0] == "load_adjustment_decay_time":
			line = "load_adjustment_decay_time 0:0:0"
		}
		b.WriteString(line + "\n")
	}
	if err := os.WriteFile(c.path("sconf"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"-Msconf", c.path("sconf")},
		{"-aq", Queue},
		{"-aattr", "queue", "hostlist", c.Host, Queue},
		{"-rattr", "queue", "slots", strconv.Itoa(opts.Slots), Queue},
		// Whatever the machine's load (other tests run beside).
		{"-rattr", "queue", "load_thresholds", "NONE", Queue},
		// Jobs' TMPDIR is named by job ID and queue: each cell's own.
		{"-rattr", "queue", "tmpdir", c.path("tmp"), Queue},
	} {
		if err := c.qconf([]string{"EDITOR=true"}, args...); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cell) qconf(env []string, args ...string) error {
	cmd := c.command(context.Background(), "qconf", args...)
	cmd.Env = append(cmd.Env, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("qconf %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (c *Cell) path(elem ...string) string { return filepath.Join(append([]string{c.Dir}, elem...)...) }

// Env is the environment the Grid Engine commands reach the cell with,
// to be added to os.Environ().
func (c *Cell) Env() []string {
	return []string{
		"SGE_ROOT=" + c.Root,
		"SGE_CELL=" + CellName,
		"SGE_QMASTER_PORT=" + strconv.Itoa(c.QmasterPort),
		"SGE_EXECD_PORT=" + strconv.Itoa(c.ExecdPort),
	}
}

func (c *Cell) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.Env()...)
	cmd.Dir = c.Dir
	return cmd
}

// Run runs a Grid Engine command and returns its standard output; it
// fails the test if the command fails.
func (c *Cell) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	return batchtest.Output(t, "sgetest", func(ctx context.Context) *exec.Cmd { return c.command(ctx, name, args...) })
}

// Jobs returns the IDs of the jobs named name that qstat shows (queued,
// running, being deleted), of any user.
func (c *Cell) Jobs(t testing.TB, name string) []string {
	t.Helper()
	out, err := c.command(context.Background(), "qstat", "-j", name).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("do not exist")) {
			return nil
		}
		t.Fatalf("sgetest: qstat -j %s: %v: %s", name, err, out)
	}
	var ids []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "job_number:" {
			ids = append(ids, f[1])
		}
	}
	return ids
}

// spawn starts a daemon in the foreground (SGE_ND), logging to log/NAME.
func (c *Cell) spawn(label, name string) error {
	cmd := c.command(context.Background(), name)
	// As a service starts it: the jobs inherit the execution daemon's
	// environment, not the test's.
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "SGE_ND=1"}, c.Env()...)
	logf, err := os.Create(c.path("log", label))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: label, cmd: cmd, done: make(chan struct{})}
	c.procs = append(c.procs, p)
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return nil
}

// Logs is the tail (4 kB) of each daemon's log and messages file, for a
// test's failure message.
func (c *Cell) Logs() string {
	files, _ := filepath.Glob(c.path("log", "*"))
	files = append(files, c.path("spool", "qmaster", "messages"))
	more, _ := filepath.Glob(c.path("spool", "execd", "*", "messages"))
	return batchtest.Tails(append(files, more...), 4000)
}

// stop kills the execution daemon with its jobs, then the qmaster, what
// is left of the jobs' processes, and removes the directory.
func (c *Cell) stop() {
	if len(c.procs) > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = c.command(ctx, "qconf", "-kej", c.Host).Run()
		cancel()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if p.name == "execd" {
			// Its orderly end, with its jobs', after qconf -kej.
			select {
			case <-p.done:
				continue
			case <-time.After(3 * time.Second):
			}
		}
		// The qmaster's spool is thrown away: no orderly end needed.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	// The shepherds and jobs carry SGE_ROOT in their environment.
	batchtest.KillByEnv("SGE_ROOT=" + c.Root)
	_ = os.RemoveAll(c.Dir)
}
