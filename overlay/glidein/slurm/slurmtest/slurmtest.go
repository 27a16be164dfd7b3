// Package slurmtest starts a real Slurm cluster on this machine for tests:
// Debian's munged, slurmctld and one or more slurmd, from a configuration
// written into a temporary directory, on ports of their own, so that any
// number of clusters (one per test) run side by side without touching the
// machine's own Slurm or munge.
//
// A test calls Start; the cluster is up (every node idle) when it returns
// and is stopped, its jobs' processes killed and its directory removed, when
// the test ends. The Slurm commands reach it through the environment that
// Env returns (SLURM_CONF; the munge socket is named in the slurm.conf), or
// through Command, which sets it:
//
//	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2})
//	out := c.Run(t, "sinfo", "-h", "-o", "%N %t")
//	site, err := slurm.New(slurm.Config{Env: c.Env(), WorkDir: t.TempDir()})
//
// From another package's test, acceptance tests included, the cluster is
// used the same way: a pondctl started as a process gets Env added to its
// environment (or in the site's Config.Env), and its work
// directory can be any directory of this machine, since the nodes are this
// machine. Jobs run as the user who submits them (root, in tests). Logs
// returns the daemons' logs for a failure message.
//
// Starting a cluster needs root (slurmd runs jobs as their owners) and the
// packages slurm-wlm and munge. Without them Start skips the test with a
// message that says what is missing, unless the environment variable CI is
// set, in which case it fails the test.
//
// Shared gives a test nodes of its own on the package's one cluster
// rather than a cluster of its own: a partition holding only its nodes,
// which the Slurm commands it runs through Env use by default and to
// which squeue, scancel and sinfo keep. The package's TestMain stops that
// cluster with StopShared. A test that needs a cluster shaped otherwise
// (accounting, a MinJobAge, partitions or features of its own, a daemon
// it stops) calls Start.
//
// By default accounting is off (accounting_storage/none, no slurmdbd):
// accounts and QOS are not enforced, and ended jobs are kept in a job
// completion log (jobcomp/filetxt, JobCompLog) that `sacct -c` reads. With
// Options.Accounting the cluster also runs slurmdbd over a MariaDB server of
// its own (Debian's slurmdbd and mariadb-server), enforces associations and
// QOS, and has the accounts and QOS the options name; that takes about 3 s
// more to start.
package slurmtest

import (
	"bytes"
	"context"
	"crypto/rand"
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

	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/overlay/glidein/batch/batchtest"
)

// Commands are the programs a cluster needs: the daemons and the client
// commands the tests use.
var Commands = []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "sacct", "scancel", "sinfo", "scontrol"}

// AccountingCommands are the programs a cluster with Options.Accounting
// needs besides Commands.
var AccountingCommands = []string{"slurmdbd", "sacctmgr", "mariadbd", "mariadb-install-db"}

// Options shape the cluster. The zero value is one node with 2 CPUs and
// 2000 MB in one partition, "debug".
type Options struct {
	// Nodes is the number of slurmd started (NodeName n1, n2, ...), each
	// with a port of its own on this host (Slurm's multiple-slurmd mode).
	// Default 1.
	Nodes int
	// CPUs and MemoryMB are what each node offers. Default 2 and 2000.
	CPUs     int
	MemoryMB int
	// Partitions are the partitions, each holding every node; the first is
	// the default. Default ["debug"].
	Partitions []string
	// MinJobAge is how long an ended job stays in squeue (Slurm's
	// MinJobAge, whole seconds). Default 300 s, Slurm's own default.
	// After it, sacct -c finds the job in the completion log.
	MinJobAge time.Duration
	// Features are the node features (for --constraint), on every node.
	Features []string
	// Extra lines are appended to slurm.conf.
	Extra []string
	// Accounting runs slurmdbd and a MariaDB server, and enforces
	// associations, limits and QOS (AccountingStorageEnforce). The user
	// root has an association with each of Accounts (the first its
	// default); QOS are created and allowed to root's associations.
	Accounting bool
	Accounts   []string
	QOS        []string
}

// Cluster is a running Slurm cluster.
type Cluster struct {
	// Dir holds the cluster's files: slurm.conf, munge, state, spool, logs.
	Dir string
	// Conf is the path of slurm.conf.
	Conf string
	// JobCompLog is the job completion log (jobcomp/filetxt).
	JobCompLog string
	// MungeSocket is munged's socket.
	MungeSocket string
	// Partitions are the partition names, the default first.
	Partitions []string
	// Nodes are the node names.
	Nodes []string
	// Startup is how long Start took, from the first daemon started to
	// every node idle.
	Startup time.Duration

	procs []*proc
	// env is added to Env: a Shared test's partition, for the commands
	// that read it from the environment.
	env []string
}

// proc is a daemon the cluster started.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when it exited; err is then set
	err  error
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Available reports why a cluster cannot be started here (not root, a
// command missing), or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("a Slurm cluster needs root (slurmd runs jobs as their owners)")
	}
	if missing := missing(Commands); len(missing) > 0 {
		return fmt.Errorf("%s not found: install Debian's slurm-wlm and munge (apt-get install slurm-wlm munge; .ci/run does)", strings.Join(missing, ", "))
	}
	return nil
}

// AvailableAccounting reports why a cluster with Options.Accounting cannot
// be started here, or nil.
func AvailableAccounting() error {
	if err := Available(); err != nil {
		return err
	}
	if missing := missing(AccountingCommands); len(missing) > 0 {
		return fmt.Errorf("%s not found: install Debian's slurmdbd and mariadb-server (apt-get install slurmdbd mariadb-server; .ci/run does)", strings.Join(missing, ", "))
	}
	return nil
}

func missing(names []string) []string {
	var m []string
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			m = append(m, name)
		}
	}
	return m
}

// Require skips the test when a cluster cannot be started here, or fails
// it when the environment variable CI is set.
func Require(t testing.TB) {
	t.Helper()
	require(t, Available())
}

// RequireAccounting is Require for a cluster with Options.Accounting.
func RequireAccounting(t testing.TB) {
	t.Helper()
	require(t, AvailableAccounting())
}

func require(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		testenv.SkipOrFailf(t, "slurmtest: %v", err)
	}
}

// Start starts a cluster and waits until every node is idle. It stops the
// cluster when the test ends.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Accounting {
		RequireAccounting(t)
	} else {
		Require(t)
	}
	c, err := start(opts)
	if c != nil {
		t.Cleanup(func() {
			began := time.Now()
			c.stop()
			t.Logf("slurmtest: cluster in %s stopped in %v", c.Dir, time.Since(began).Round(time.Millisecond))
		})
	}
	if err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	t.Logf("slurmtest: cluster in %s up in %v", c.Dir, c.Startup.Round(time.Millisecond))
	return c
}

// start starts a cluster of opts and waits until every node is idle. The
// cluster is returned, for stop, once its directory exists, even with an
// error. Its ports are chosen free, then bound by the daemons: a process
// that takes one in between (another test's listener) makes a daemon fail
// with "Address already in use", and the cluster is started again, in a
// fresh directory on fresh ports, up to three times.
func start(opts Options) (*Cluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := startOnce(opts)
		if err == nil || c == nil || attempt == 3 || !strings.Contains(err.Error(), "Address already in use") {
			return c, err
		}
		c.stop()
	}
}

// startOnce is one attempt of start.
func startOnce(opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	c, err := newCluster(opts)
	if err != nil {
		return c, err
	}
	ports, err := c.writeFiles(opts)
	if err != nil {
		return c, err
	}
	began := time.Now()
	if err := c.startDaemons(opts, ports); err != nil {
		return c, err
	}
	if err := c.waitIdle(); err != nil {
		return c, err
	}
	if opts.Accounting {
		if err := c.addAssociations(opts); err != nil {
			return c, err
		}
	}
	c.Startup = time.Since(began)
	return c, nil
}

// withDefaults returns opts with the sizes left zero set: one node of two
// CPUs and 2000 MB, a partition "debug", jobs kept 300 s.
func (opts Options) withDefaults() Options {
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.CPUs <= 0 {
		opts.CPUs = 2
	}
	if opts.MemoryMB <= 0 {
		opts.MemoryMB = 2000
	}
	if len(opts.Partitions) == 0 {
		opts.Partitions = []string{"debug"}
	}
	if opts.MinJobAge <= 0 {
		opts.MinJobAge = 300 * time.Second
	}
	return opts
}

// newCluster makes the cluster's directory and the munge, state, log and
// node spool directories in it. The cluster is returned once its directory
// exists, for stop to remove, even with an error.
func newCluster(opts Options) (*Cluster, error) {
	// Under /tmp rather than t.TempDir: unix socket paths are short.
	dir, err := os.MkdirTemp("", "slurmtest")
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Dir:         dir,
		Conf:        filepath.Join(dir, "slurm.conf"),
		JobCompLog:  filepath.Join(dir, "jobcomp.txt"),
		MungeSocket: filepath.Join(dir, "munge", "socket"),
		Partitions:  opts.Partitions,
	}
	for i := 1; i <= opts.Nodes; i++ {
		c.Nodes = append(c.Nodes, "n"+strconv.Itoa(i))
	}
	for _, sub := range []string{"munge", "state", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return c, err
		}
	}
	for _, n := range c.Nodes {
		if err := os.MkdirAll(filepath.Join(dir, "spool", n), 0o700); err != nil {
			return c, err
		}
	}
	return c, nil
}

// mungeKey is the path of the cluster's munge key.
func (c *Cluster) mungeKey() string { return filepath.Join(c.Dir, "munge", "munge.key") }

// writeFiles writes a fresh munge key and slurm.conf, on free ports that
// it returns.
func (c *Cluster) writeFiles(opts Options) (portSet, error) {
	key := make([]byte, 128)
	if _, err := rand.Read(key); err != nil {
		return portSet{}, err
	}
	if err := os.WriteFile(c.mungeKey(), key, 0o600); err != nil {
		return portSet{}, err
	}
	p, err := batchtest.FreePorts(3 + opts.Nodes)
	if err != nil {
		return portSet{}, err
	}
	ports := portSet{ctld: p[0], dbd: p[1], db: p[2], nodes: p[3:]}
	if err := os.WriteFile(c.Conf, []byte(c.config(opts, ports)), 0o644); err != nil {
		return portSet{}, err
	}
	return ports, nil
}

// startDaemons starts munged, the accounting daemons with
// opts.Accounting, slurmctld and a slurmd per node, each once the one it
// needs is ready.
func (c *Cluster) startDaemons(opts Options, ports portSet) error {
	dir := c.Dir
	if err := c.spawn("munged", "munged", "--foreground", "--force",
		"--key-file="+c.mungeKey(), "--socket="+c.MungeSocket,
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"),
		"--seed-file="+filepath.Join(dir, "munge", "munged.seed"),
		"--log-file="+filepath.Join(dir, "munge", "munged.log")); err != nil {
		return err
	}
	if err := batchtest.WaitFor(5*time.Second, 10*time.Millisecond, func() bool { _, err := os.Stat(c.MungeSocket); return err == nil }); err != nil {
		return fmt.Errorf("munged did not create its socket %s: %s", c.MungeSocket, c.Logs())
	}
	if opts.Accounting {
		if err := c.startAccounting(ports); err != nil {
			return err
		}
	}
	if err := c.spawn("slurmctld", "slurmctld", "-D", "-i", "-f", c.Conf); err != nil {
		return err
	}
	// A Slurm command or slurmd that finds no controller sleeps a second
	// before it tries again: start them once it listens.
	if err := c.waitListen("slurmctld", ports.ctld); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := c.spawn("slurmd-"+n, "slurmd", "-D", "-N", n, "-f", c.Conf); err != nil {
			return err
		}
	}
	return nil
}

// waitIdle waits until sinfo sees every node idle, and fails as soon as a
// daemon exits.
func (c *Cluster) waitIdle() error {
	var last string
	err := batchtest.WaitFor(30*time.Second, 10*time.Millisecond, func() bool {
		for _, p := range c.procs {
			if p.exited() {
				return true // reported below
			}
		}
		out, err := c.Command(context.Background(), "sinfo", "-h", "-N", "-o", "%N %t").CombinedOutput()
		last = string(out)
		if err != nil {
			return false
		}
		return idleNodes(last) == len(c.Nodes)
	})
	for _, p := range c.procs {
		if p.exited() {
			return fmt.Errorf("%s exited (%v)\n%s", p.name, p.err, c.Logs())
		}
	}
	if err != nil {
		return fmt.Errorf("the nodes did not become idle in 30s (sinfo: %q)\n%s", last, c.Logs())
	}
	return nil
}

// idleNodes counts the nodes sinfo -N -o "%N %t" shows idle; it lists a
// node once per partition.
func idleNodes(sinfo string) int {
	idle := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(sinfo), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[1] == "idle" {
			idle[f[0]] = true
		}
	}
	return len(idle)
}

// portSet are the TCP ports of a cluster's daemons.
type portSet struct {
	ctld, dbd, db int
	nodes         []int
}

// waitListen waits until the daemon started last listens on port.
func (c *Cluster) waitListen(name string, port int) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p := c.procs[len(c.procs)-1]
	if err := batchtest.WaitFor(20*time.Second, 10*time.Millisecond, func() bool {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil || p.exited()
	}); err != nil || p.exited() {
		return fmt.Errorf("%s does not listen on %s (%v)\n%s", name, addr, p.err, c.Logs())
	}
	return nil
}

// startAccounting starts a MariaDB server on a fresh data directory, then
// slurmdbd over it.
func (c *Cluster) startAccounting(ports portSet) error {
	db := filepath.Join(c.Dir, "mariadb")
	if err := os.MkdirAll(filepath.Join(db, "data"), 0o700); err != nil {
		return err
	}
	// Small files: the cluster holds a handful of jobs.
	opts := []string{"--no-defaults", "--datadir=" + filepath.Join(db, "data"), "--innodb-log-file-size=4M",
		"--innodb-buffer-pool-size=16M", "--innodb-data-file-path=ibdata1:4M:autoextend"}
	install := exec.Command("mariadb-install-db", append(opts, "--user=root", "--auth-root-authentication-method=normal", "--skip-test-db")...)
	if out, err := install.CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
	}
	if err := c.spawn("mariadbd", "mariadbd", append(opts, "--user=root", "--port="+strconv.Itoa(ports.db), "--bind-address=127.0.0.1",
		"--socket="+filepath.Join(db, "socket"), "--pid-file="+filepath.Join(db, "pid"), "--skip-name-resolve",
		"--log-error="+filepath.Join(c.Dir, "log", "mariadbd.log"))...); err != nil {
		return err
	}
	if err := c.waitListen("mariadbd", ports.db); err != nil {
		return err
	}
	var b strings.Builder
	for _, l := range []string{
		"AuthType=auth/munge",
		"AuthInfo=socket=" + c.MungeSocket,
		"DbdHost=localhost",
		"DbdPort=" + strconv.Itoa(ports.dbd),
		"SlurmUser=root",
		"StorageType=accounting_storage/mysql",
		"StorageHost=127.0.0.1",
		"StoragePort=" + strconv.Itoa(ports.db),
		"StorageUser=root",
		"StorageLoc=slurm_acct_db",
		"PidFile=" + filepath.Join(c.Dir, "slurmdbd.pid"),
		"LogFile=" + filepath.Join(c.Dir, "log", "slurmdbd.log"),
	} {
		b.WriteString(l + "\n")
	}
	// slurmdbd reads slurmdbd.conf beside slurm.conf, and wants it 0600.
	if err := os.WriteFile(filepath.Join(c.Dir, "slurmdbd.conf"), []byte(b.String()), 0o600); err != nil {
		return err
	}
	if err := c.spawn("slurmdbd", "slurmdbd", "-D"); err != nil {
		return err
	}
	return c.waitListen("slurmdbd", ports.dbd)
}

// addAssociations gives root the accounts and QOS of opts.
func (c *Cluster) addAssociations(opts Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sacctmgr := func(args ...string) error {
		out, err := c.Command(ctx, "sacctmgr", append([]string{"--immediate"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("sacctmgr %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if len(opts.QOS) > 0 {
		if err := sacctmgr(append([]string{"add", "qos"}, strings.Join(opts.QOS, ","))...); err != nil {
			return err
		}
	}
	if len(opts.Accounts) > 0 {
		if err := sacctmgr("add", "account", strings.Join(opts.Accounts, ","), "cluster=pondtest"); err != nil {
			return err
		}
		args := []string{"add", "user", "root", "account=" + strings.Join(opts.Accounts, ","), "defaultaccount=" + opts.Accounts[0], "cluster=pondtest"}
		if err := sacctmgr(args...); err != nil {
			return err
		}
	}
	if len(opts.QOS) > 0 {
		if err := sacctmgr("modify", "user", "root", "set", "qos+="+strings.Join(opts.QOS, ",")); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) config(opts Options, ports portSet) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("# written by slurmtest")
	line("ClusterName=pondtest")
	line("SlurmctldHost=localhost")
	line("SlurmctldPort=%d", ports.ctld)
	line("SlurmUser=root")
	line("SlurmdUser=root")
	line("AuthType=auth/munge")
	line("CredType=cred/munge")
	line("AuthInfo=socket=%s", c.MungeSocket)
	line("StateSaveLocation=%s", filepath.Join(c.Dir, "state"))
	line("SlurmdSpoolDir=%s", filepath.Join(c.Dir, "spool", "%n"))
	line("SlurmctldPidFile=%s", filepath.Join(c.Dir, "slurmctld.pid"))
	line("SlurmdPidFile=%s", filepath.Join(c.Dir, "slurmd-%n.pid"))
	line("SlurmctldLogFile=%s", filepath.Join(c.Dir, "log", "slurmctld.log"))
	line("SlurmdLogFile=%s", filepath.Join(c.Dir, "log", "slurmd-%n.log"))
	line("ProctrackType=proctrack/linuxproc")
	line("TaskPlugin=task/none")
	line("SelectType=select/cons_tres")
	line("SelectTypeParameters=CR_Core_Memory")
	line("DefMemPerCPU=100")
	if opts.Accounting {
		line("AccountingStorageType=accounting_storage/slurmdbd")
		line("AccountingStorageHost=localhost")
		line("AccountingStoragePort=%d", ports.dbd)
		// The munge socket slurmctld reaches slurmdbd with.
		line("AccountingStoragePass=%s", c.MungeSocket)
		line("AccountingStorageEnforce=associations,limits,qos")
	} else {
		line("AccountingStorageType=accounting_storage/none")
	}
	line("JobAcctGatherType=jobacct_gather/none")
	line("JobCompType=jobcomp/filetxt")
	line("JobCompLoc=%s", c.JobCompLog)
	line("MpiDefault=none")
	line("MailProg=/bin/true")
	line("ReturnToService=2")
	line("MinJobAge=%d", max(1, int(opts.MinJobAge/time.Second)))
	line("KillWait=2")
	line("InactiveLimit=0")
	line("Waittime=0")
	line("SlurmctldTimeout=30")
	line("SlurmdTimeout=30")
	features := ""
	if len(opts.Features) > 0 {
		features = " Features=" + strings.Join(opts.Features, ",")
	}
	for i, n := range c.Nodes {
		line("NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d CPUs=%d RealMemory=%d%s State=UNKNOWN",
			n, ports.nodes[i], opts.CPUs, opts.MemoryMB, features)
	}
	for i, p := range opts.Partitions {
		def := "NO"
		if i == 0 {
			def = "YES"
		}
		line("PartitionName=%s Nodes=ALL Default=%s MaxTime=INFINITE State=UP", p, def)
	}
	for _, l := range opts.Extra {
		line("%s", l)
	}
	return b.String()
}

// Env is the environment the Slurm commands need to reach the cluster, to
// be added to os.Environ().
func (c *Cluster) Env() []string {
	return append([]string{"SLURM_CONF=" + c.Conf}, c.env...)
}

// Command prepares a Slurm command (sbatch, squeue, ...) that reaches the
// cluster.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.Env()...)
	return cmd
}

// Run runs a Slurm command and returns its standard output; it fails the
// test if the command fails.
func (c *Cluster) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	return batchtest.Output(t, "slurmtest", func(ctx context.Context) *exec.Cmd { return c.Command(ctx, name, args...) })
}

func (c *Cluster) spawn(label, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), c.Env()...)
	logf, err := os.Create(filepath.Join(c.Dir, "log", label+".out"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	// A process group of its own: a ^C to the test does not reach it
	// before the cleanup does. A test binary killed outright takes the
	// daemons with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: label, cmd: cmd, done: make(chan struct{})}
	c.procs = append(c.procs, p)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return nil
}

// Logs is the tail (2 kB) of each daemon's log, for a test's failure
// message.
func (c *Cluster) Logs() string {
	files, _ := filepath.Glob(filepath.Join(c.Dir, "log", "*"))
	return batchtest.Tails(append(files, filepath.Join(c.Dir, "munge", "munged.log")), 2000)
}

// stop cancels the cluster's jobs, stops the daemons, kills what is left
// of the jobs' processes and removes the directory.
func (c *Cluster) stop() {
	if len(c.procs) > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = c.Command(ctx, "scancel", "--full", "--user=root").Run()
		// Wait a little for the jobs to end by themselves.
		_ = batchtest.WaitFor(3*time.Second, 10*time.Millisecond, func() bool {
			out, err := c.Command(ctx, "squeue", "-h", "-t", "RUNNING,COMPLETING,PENDING", "-o", "%i").Output()
			return err == nil && len(bytes.TrimSpace(out)) == 0
		})
		cancel()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	// slurmstepd and the jobs it started outlive slurmd; they carry the
	// cluster's SLURM_CONF in their environment.
	batchtest.KillByEnv("SLURM_CONF=" + c.Conf)
	_ = os.RemoveAll(c.Dir)
}

// SharedNodes is the number of nodes of a package's shared cluster
// (Shared), each of the default size: 2 CPUs, 2000 MB.
const SharedNodes = 4

// sharedWait is how long Shared waits for nodes other tests hold.
const sharedWait = 5 * time.Minute

// shared is the cluster a package's tests share (Shared): started by the
// first test that asks for it, stopped by StopShared.
var shared struct {
	once sync.Once
	c    *Cluster
	err  error

	mu    sync.Mutex
	freed *sync.Cond // signalled when nodes go back to free
	free  []string   // the nodes no test holds
	parts int        // partitions made so far, to name the next
}

// Shared gives the test n nodes of its own (1 to SharedNodes) on the
// package's shared cluster, started by the first test that asks for it,
// and returns a view of that cluster: Partitions is a partition made for
// the test, holding only its nodes, and Nodes those nodes. Env names the
// partition to sbatch, squeue, scancel and sinfo (SBATCH_PARTITION and
// the like), so that the test's jobs run on its nodes and it sees only
// them in squeue; sacct and the completion log are the cluster's, and
// show every test's jobs. A test waits while other tests hold the nodes
// it needs, up to 5 minutes. When it ends, its jobs are cancelled and its
// nodes, once idle again, go to the next test. The package's TestMain calls
// StopShared after m.Run.
func Shared(t testing.TB, n int) *Cluster {
	t.Helper()
	Require(t)
	if n < 1 || n > SharedNodes {
		t.Fatalf("slurmtest: Shared(%d): want 1 to %d nodes", n, SharedNodes)
	}
	shared.once.Do(func() {
		shared.freed = sync.NewCond(&shared.mu)
		shared.c, shared.err = start(Options{Nodes: SharedNodes})
		if shared.err == nil {
			shared.free = append([]string(nil), shared.c.Nodes...)
			t.Logf("slurmtest: cluster in %s up in %v, shared by the package's tests", shared.c.Dir, shared.c.Startup.Round(time.Millisecond))
		}
	})
	if shared.err != nil {
		t.Fatalf("slurmtest: the shared cluster: %v", shared.err)
	}
	base := shared.c
	// Waiting on freed, with a timer to give up: a node a test could not
	// give back never comes back.
	waited := time.AfterFunc(sharedWait, func() {
		shared.mu.Lock()
		shared.freed.Broadcast()
		shared.mu.Unlock()
	})
	defer waited.Stop()
	began := time.Now()
	shared.mu.Lock()
	for len(shared.free) < n {
		if time.Since(began) >= sharedWait {
			free := len(shared.free)
			shared.mu.Unlock()
			t.Fatalf("slurmtest: %d nodes of the shared cluster wanted, %d free after %v: the others are held by tests, or were not given back", n, free, sharedWait)
		}
		shared.freed.Wait()
	}
	nodes := shared.free[:n:n]
	shared.free = shared.free[n:]
	shared.parts++
	part := "t" + strconv.Itoa(shared.parts)
	shared.mu.Unlock()

	c := &Cluster{Dir: base.Dir, Conf: base.Conf, JobCompLog: base.JobCompLog, MungeSocket: base.MungeSocket,
		Partitions: []string{part}, Nodes: nodes}
	for _, v := range []string{"SBATCH_PARTITION", "SQUEUE_PARTITION", "SCANCEL_PARTITION", "SINFO_PARTITION"} {
		c.env = append(c.env, v+"="+part)
	}
	t.Cleanup(func() { release(t, base, part, nodes) })
	base.Run(t, "scontrol", "create", "PartitionName="+part, "Nodes="+strings.Join(nodes, ","),
		"MaxTime=INFINITE", "State=UP", "Default=NO")
	return c
}

// release cancels the jobs of a Shared test's partition and gives its
// nodes back once no job is left on them. A node that stays busy is not
// given back: the tests that need it then wait for the package's timeout,
// which names them.
func release(t testing.TB, c *Cluster, part string, nodes []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	_ = c.Command(ctx, "scancel", "--full", "--partition="+part).Run()
	var last string
	err := batchtest.WaitFor(45*time.Second, 10*time.Millisecond, func() bool {
		// Each node's jobs, whatever their partition; and its state.
		out, err := c.Command(ctx, "squeue", "-h", "-w", strings.Join(nodes, ","), "-t", "RUNNING,COMPLETING,PENDING,CONFIGURING", "-o", "%i %P").CombinedOutput()
		last = string(out)
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			return false
		}
		out, err = c.Command(ctx, "sinfo", "-h", "-N", "-n", strings.Join(nodes, ","), "-o", "%N %t").CombinedOutput()
		last = string(out)
		return err == nil && idleNodes(last) == len(nodes)
	})
	if err != nil {
		t.Errorf("slurmtest: nodes %s of partition %s still busy after its test: %s\n%s", strings.Join(nodes, ","), part, last, c.Logs())
		return
	}
	t.Logf("slurmtest: nodes %s of partition %s free again in %v", strings.Join(nodes, ","), part, time.Since(began).Round(time.Millisecond))
	_ = c.Command(ctx, "scontrol", "delete", "PartitionName="+part).Run()
	shared.mu.Lock()
	shared.free = append(shared.free, nodes...)
	shared.freed.Broadcast()
	shared.mu.Unlock()
}

// StopShared stops the package's shared cluster (Shared), if a test
// started it. A TestMain calls it after m.Run.
func StopShared() {
	if shared.c != nil {
		shared.c.stop()
	}
}
