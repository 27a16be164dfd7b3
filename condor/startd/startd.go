// Package startd is pond's startd: it advertises the machine's slots to the
// pool's collector, grants claims the negotiator matched (carving dynamic
// slots out of a partitionable slot), and runs each job as a real OS process
// through its starter, enforcing the job's memory request and START, RANK and
// PREEMPT policy.
package startd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/hostinfo"
	"github.com/pond-htc/pond/condor/internal/retry"
	"github.com/pond-htc/pond/condor/wire"
)

// Options configure a Startd.
type Options struct {
	Config  *config.Config
	Name    string // machine name (default the host name)
	Address string // this node's API address, advertised to schedds
	DataDir string // the EXECUTE directory holds job scratch directories under it
	// SharedExecute is where a startd running as root keeps its execute
	// directory when its job users could not reach DataDir/execute (a
	// data directory private to its owner, as the local provider's under
	// .pond): SharedExecute/NAME-HASH, HASH that of the data directory.
	// Empty for DefaultSharedExecute.
	SharedExecute string
	// Token gives the token the startd presents to the other daemons (nil:
	// none, for an open pool); it is called for each call, so that a
	// refreshed token is used at once.
	Token func() string
	// TLS is the sea's TLS other nodes' daemons are called with; nil
	// speaks plain HTTP.
	TLS *tls.Config
	// Collector returns the collector's address (CONDOR_HOST) when the
	// startd reports; it may change at run time.
	Collector func() string
	// Attrs are extra machine attributes (name -> expression text), such as
	// an agent's -attr values.
	Attrs  map[string]string
	Logger *slog.Logger
	// OnQuarantine, when set, is told each time the machine is
	// quarantined as a black hole (it could not start jobs again and again through its own fault)
	// and when the quarantine lifts (nil), so that the node can show it
	// and a pilot factory retire it. It must not block.
	OnQuarantine func(*Quarantine)
	// Quarantine, when set, is a quarantine the machine was under before
	// a restart: it holds until its Until (one already over is ignored),
	// so that a black hole stays one across its agent's restarts.
	Quarantine *Quarantine
}

// token is the token to present now ("" for none).
func (o *Options) token() string {
	if o.Token == nil {
		return ""
	}
	return o.Token()
}

// Startd runs one machine's slots. Create it with New and run it with Run.
type Startd struct {
	opts Options
	// addr is the node's API address now: Options.Address, or the last
	// SetAddress.
	addr    atomic.Pointer[string]
	log     *slog.Logger
	machine *classad.Ad // machine-wide attributes
	start   classad.Expr
	// advStart is the START the slot ads carry: start and pondStart.
	advStart classad.Expr
	rank     classad.Expr
	preempt  classad.Expr
	// wantVacate is WANT_VACATE (MY the slot, TARGET the job): whether a
	// preempted job is soft-killed before it is killed.
	wantVacate classad.Expr
	poll       time.Duration
	update     time.Duration
	idleMax    time.Duration // CLAIM_IDLE_TIMEOUT
	// claimCheck bounds the wait for a schedd's answer on whether it
	// still holds an idle claim (releaseForgottenClaims).
	claimCheck time.Duration
	// alive is how often a running job's claim is renewed with its schedd
	// (ALIVE_INTERVAL); claimLease how long it runs without a renewal
	// (ALIVE_INTERVAL * MAX_CLAIM_ALIVES_MISSED) before it is killed.
	alive, claimLease time.Duration
	users             *slotUsers // the users jobs run as when the startd runs as root
	// execute holds the jobs' scratch directories; ownExecute says it is
	// one of the startd's own choosing, removed on shutdown.
	execute    string
	ownExecute bool
	iso        isolation   // how jobs are confined
	cont       containment // the jobs' cgroups
	spares     spareDirs   // private temporary directories for next jobs

	// adv serializes updates and invalidations: an update in flight to
	// a collector the startd is leaving lands before the invalidation.
	adv sync.Mutex
	// advTo and advStop are the collector an update in flight goes to and
	// what cancels it: a move away from a collector that does not answer
	// need not wait for that update's timeout.
	advMu   sync.Mutex
	advTo   string
	advStop context.CancelFunc
	// sent is what the collector sentTo holds of the slots since the
	// last successful update (see advertise), nil when a full update is
	// due; s.adv guards both.
	sent   map[string]uint64
	sentTo string
	mu     sync.Mutex
	slots  []*slot          // static and partitionable slots
	claims map[string]*slot // claim id -> claimable or claimed slot
	// residents are the resident supervisors of live claims between
	// their jobs (see resident), at most one a claim; a running job's is
	// its run's.
	residents map[string]*resident
	nextDyn   map[int]int
	dirty     chan struct{}
	// activity says that only the Activity of a claimed slot changed
	// (Busy, Idle between its claim's jobs): advertised at most once an
	// activityUpdate, not soon after each change (see Run).
	activity chan struct{}
	wg       sync.WaitGroup
	closed   bool
	// draining refuses claims and activations (Drain, Resume); drain is
	// the drain an administrator asked for (StartDrain, CancelDrain), nil
	// when none; drainSeq numbers their requests; lastDrainStart and
	// lastDrainStop are when the last began and ended.
	draining                      bool
	drain                         *adminDrain
	drainSeq                      int
	lastDrainStart, lastDrainStop time.Time
	// health holds the knobs of the machine's health and end; streak
	// counts the jobs in a row the machine could not start; quarantine is the
	// machine's quarantine, nil when it takes jobs; retiring says that its
	// end is near (POND_END_GRACE).
	health health
	streak int
	// totalCpus and totalMemory (MiB) are what the startd divides among
	// its slots (NUM_CPUS, MEMORY).
	totalCpus, totalMemory int
	quarantine             *Quarantine
	retiring               bool
	// jobStarts counts the jobs the machine took (activations accepted),
	// against POND_MAX_JOBS.
	jobStarts int
	// epoch is the highest central-manager epoch the startd has seen, in
	// its configuration (wire.EpochKnob) or in a claim it granted: it
	// refuses claims of a lower one (fencing a replaced negotiator).
	epoch int64
	now   func() time.Time
	// onStart, when set (tests), is called as a job starts, without s.mu:
	// just before its supervisor is started (supervised false) and just
	// after (true).
	onStart func(supervised bool)
	stop    context.Context // canceled at shutdown
	cancel  context.CancelFunc
}

type slot struct {
	id, sub       int
	name          string
	partitionable bool
	parent        *slot
	cpus, memory  int   // memory in MB
	disk          int64 // KB
	totalCpus     int
	totalMemory   int
	totalDisk     int64
	claimID       string
	state         string // Unclaimed, Claimed
	activity      string // Idle, Busy
	entered       time.Time
	schedd        string
	scheddName    string
	job           *classad.Ad
	jobID         string
	run           *run
	reporting     bool // the starter is reporting the job's end
	// answered is when the schedd answered the report of the claim's
	// last job: the claim is idle from then (idleSince), not from the
	// job's end.
	answered time.Time
	stage    *stage // input files received for the job to activate
	retire   bool   // released once the job's end is reported (drain)
	children map[string]*slot

	// reported is the job whose end the slot's claim last reported (or
	// is reporting): a refused report of an earlier job, answered late,
	// says nothing of the claim's later job.
	reported string

	// limits is the ConcurrencyLimits of the job that claimed the slot,
	// shown while it is claimed for the negotiator to count.
	limits string

	// preemptID is the claim id a claimed slot advertises (privately) for
	// the negotiator to hand to a job that may preempt it; preempting is
	// the claim that does, waiting for the slot; retiring says the
	// preempted job runs out its retirement time; claimJob is the job the
	// slot was claimed for (its CurrentRank before a job runs).
	preemptID  string
	preempting *preemption
	retiring   bool
	claimJob   *classad.Ad
	// evicting is the eviction of the slot's job under way (a preempting
	// claim, PREEMPT, a drain), nil when none; phase is "Vacating" once
	// the job has had its soft kill and "Killing" once it is killed
	// (Preempting/Vacating, Preempting/Killing), "" before.
	evicting *eviction
	phase    string
}

// receiving reports whether input files are arriving for the slot's
// next job; s.mu must be held.
func (sl *slot) receiving() bool { return sl.stage != nil && sl.stage.receiving > 0 }

func newClaimID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// New builds a startd from its configuration: one partitionable slot with
// the whole machine by default, or the slots NUM_SLOTS / SLOT_TYPE_<n>
// declare.
func New(opts Options) (*Startd, error) {
	if opts.Config == nil {
		opts.Config = config.New(config.Options{})
	}
	cfg := opts.Config
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		opts.Name, _ = os.Hostname()
	}
	if opts.Collector == nil {
		opts.Collector = func() string { return "" }
	}
	s := &Startd{opts: opts, log: opts.Logger.With("daemon", "startd"), claims: map[string]*slot{}, residents: map[string]*resident{},
		nextDyn: map[int]int{}, dirty: make(chan struct{}, 1), activity: make(chan struct{}, 1), now: time.Now}
	s.addr.Store(&opts.Address)
	s.stop, s.cancel = context.WithCancel(context.Background())
	var err error
	if s.start, err = policyExpr(cfg, "START", "true"); err != nil {
		return nil, err
	}
	if s.advStart, err = startExpr(s.start); err != nil {
		return nil, err
	}
	if s.health, err = readHealth(cfg); err != nil {
		return nil, err
	}
	if q := opts.Quarantine; q != nil && s.now().Before(q.Until) {
		restored := *q
		s.quarantine = &restored
		s.log.Warn("the machine is still quarantined: it could not start jobs before a restart", "reason", q.Reason,
			"until", q.Until.UTC().Format(time.RFC3339))
	}
	if s.epoch, err = readEpoch(cfg); err != nil {
		return nil, err
	}
	if s.rank, err = rankOf(cfg); err != nil {
		return nil, err
	}
	if s.preempt, err = policyExpr(cfg, "PREEMPT", "false"); err != nil {
		return nil, err
	}
	if s.wantVacate, err = policyExpr(cfg, "WANT_VACATE", "true"); err != nil {
		return nil, err
	}
	for _, w := range unsupportedPolicy(cfg) {
		s.log.Warn(w)
	}
	if s.poll, err = cfg.Duration("STARTER_POLL_INTERVAL", time.Second); err != nil {
		return nil, fmt.Errorf("STARTER_POLL_INTERVAL: %w", err)
	}
	if s.update, err = cfg.Duration("UPDATE_INTERVAL", 300*time.Second); err != nil {
		return nil, fmt.Errorf("UPDATE_INTERVAL: %w", err)
	}
	if s.idleMax, err = cfg.Duration("CLAIM_IDLE_TIMEOUT", 120*time.Second); err != nil {
		return nil, fmt.Errorf("CLAIM_IDLE_TIMEOUT: %w", err)
	}
	s.claimCheck = claimCheckTimeout
	if s.alive, s.claimLease, err = ClaimLease(cfg); err != nil {
		return nil, err
	}
	asRoot := os.Geteuid() == 0
	if err := s.makeExecute(asRoot); err != nil {
		return nil, err
	}
	s.log.Info("the jobs' scratch directories are in the execute directory", "execute", s.execute)
	if err := s.sweepExecute(); err != nil {
		return nil, err
	}
	if s.iso, err = s.jobIsolation(cfg); err != nil {
		return nil, err
	}
	if s.cont, err = s.jobContainment(cfg); err != nil {
		return nil, err
	}
	if s.machine, err = s.machineAd(cfg); err != nil {
		return nil, err
	}
	if err := s.buildSlots(); err != nil {
		return nil, err
	}
	s.checkProcessIDs()
	s.checkJobMaxPids()
	if asRoot {
		if s.users, err = newSlotUsers(cfg, s.slots); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Defaults of the claim lease: a running job's claim is renewed every
// DefaultAliveInterval, and one not renewed for DefaultMaxAlivesMissed
// intervals is lost.
const (
	DefaultAliveInterval   = 2 * time.Second
	DefaultMaxAlivesMissed = 5
)

// ClaimLease returns the claim lease cfg configures: how often a running
// job's claim is renewed (ALIVE_INTERVAL) and how long a claim lasts
// without a renewal (that times MAX_CLAIM_ALIVES_MISSED). The startd kills
// a job whose claim it could not renew for the lease; the schedd requeues
// a job it has not heard of for the lease and one interval more, so a job
// never runs in two places. Both daemons must see the same values.
func ClaimLease(cfg *config.Config) (alive, lease time.Duration, err error) {
	if alive, err = cfg.Duration("ALIVE_INTERVAL", DefaultAliveInterval); err != nil {
		return 0, 0, fmt.Errorf("ALIVE_INTERVAL: %w", err)
	}
	if alive <= 0 {
		return 0, 0, fmt.Errorf("ALIVE_INTERVAL: %v is not a positive interval", alive)
	}
	missed, err := cfg.Int("MAX_CLAIM_ALIVES_MISSED", DefaultMaxAlivesMissed)
	if err != nil {
		return 0, 0, fmt.Errorf("MAX_CLAIM_ALIVES_MISSED: %w", err)
	}
	if missed < 1 {
		return 0, 0, fmt.Errorf("MAX_CLAIM_ALIVES_MISSED: %d is not a positive count", missed)
	}
	return alive, alive * time.Duration(missed), nil
}

func policyExpr(cfg *config.Config, knob, def string) (classad.Expr, error) {
	v, ok := cfg.Get(knob)
	if !ok || strings.TrimSpace(v) == "" {
		v = def
	}
	e, err := classad.ParseExpr(v)
	if err != nil {
		return nil, fmt.Errorf("configuration knob %s: %w", knob, err)
	}
	return e, nil
}

// executeDir is the directory that holds the jobs' scratch directories.
func (s *Startd) executeDir() string { return s.execute }

// ExecuteDir returns the directory that holds the jobs' scratch
// directories (dir_* inside), as HTCondor's EXECUTE.
func (s *Startd) ExecuteDir() string { return s.execute }

func (s *Startd) configuredExecuteDir() string {
	if v, ok := s.opts.Config.Get("EXECUTE"); ok && v != "" && s.opts.DataDir == "" {
		return v
	}
	return filepath.Join(s.opts.DataDir, "execute")
}

// stranger is a user who owns nothing and is in no group: a directory
// such a user may search, any job user may.
var stranger = &syscall.Credential{Uid: math.MaxUint32 - 1, Gid: math.MaxUint32 - 1}

// traversable reports whether the user of cred may search every directory
// from the root down to dir, as exec'ing a program below dir requires.
func traversable(dir string, cred *syscall.Credential) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for p := abs; ; p = filepath.Dir(p) {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err == nil {
			var bit uint32
			switch {
			case st.Uid == cred.Uid:
				bit = 0o100
			case st.Gid == cred.Gid || slices.Contains(cred.Groups, st.Gid):
				bit = 0o010
			default:
				bit = 0o001
			}
			if st.Mode&bit == 0 {
				return false
			}
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}

// safeName keeps the letters, digits, dots, dashes and underscores of a
// machine name, for use in a path.
func safeName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// machineAd gathers the machine's facts and the STARTD_ATTRS of cfg.
func (s *Startd) machineAd(cfg *config.Config) (*classad.Ad, error) {
	host := config.DetectHost()
	ad := classad.NewAd()
	ad.SetString("MyType", "Machine")
	ad.SetString("TargetType", "Job")
	ad.SetString("Machine", s.opts.Name)
	ad.SetString("Arch", firstNonEmpty(host.Arch, "X86_64"))
	ad.SetString("OpSys", firstNonEmpty(host.OpSys, "LINUX"))
	ad.SetString("OpSysAndVer", "LINUX")
	ad.SetString("CondorVersion", "$CondorVersion: "+config.Version+" pond $")
	setAddress(ad, s.Address())
	uid, _ := cfg.Get("UID_DOMAIN")
	fs, _ := cfg.Get("FILESYSTEM_DOMAIN")
	ad.SetString("UidDomain", firstNonEmpty(uid, s.opts.Name))
	ad.SetString("FileSystemDomain", firstNonEmpty(fs, s.opts.Name))
	ad.SetBool("HasFileTransfer", true)
	ad.SetBool("HasJobDeferral", true)
	ad.SetInt("DetectedCpus", int64(host.CPUs))
	ad.SetInt("DetectedMemory", int64(host.MemoryMB))
	up, _ := hostinfo.Uptime()
	ad.SetInt("KeyboardIdle", int64(up.Seconds()))
	ad.SetInt("ConsoleIdle", int64(up.Seconds()))
	load, _ := hostinfo.LoadAvg()
	ad.SetReal("TotalLoadAvg", load)
	ad.SetReal("LoadAvg", load)
	ad.SetInt("DaemonStartTime", time.Now().Unix())
	ad.Set("Start", s.advStart)
	ad.Set("Requirements", classad.MustParseExpr("START"))
	ad.Set("Rank", s.rank)
	s.iso.advertise(ad)
	s.cont.advertise(ad)
	for _, n := range append(cfg.List("STARTD_ATTRS"), cfg.List("STARTD_EXPRS")...) {
		if v, ok := cfg.Get(n); ok {
			if err := ad.SetExpr(n, v); err != nil {
				return nil, fmt.Errorf("STARTD_ATTRS: %s: %w", n, err)
			}
		}
	}
	names := make([]string, 0, len(s.opts.Attrs))
	for n := range s.opts.Attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := ad.SetExpr(n, s.opts.Attrs[n]); err != nil {
			return nil, fmt.Errorf("machine attribute %s: %w", n, err)
		}
	}
	return ad, nil
}

// Reconfig re-reads STARTD_ATTRS (and the knobs it names) from cfg, so that
// attributes set at run time, such as a pond's PondName and PondID stamps,
// reach the slot ads, and the knobs of the machine's health and end
// (POND_END_TIME, POND_BLACKHOLE_*, POND_QUARANTINE_TIME, POND_END_GRACE),
// and RANK with the terms pond adds (rankOf: a pond's PondJobIds comes at
// run time); the slots are advertised again soon after. Other knobs take effect when
// the startd is restarted.
func (s *Startd) Reconfig(cfg *config.Config) error {
	h, err := readHealth(cfg)
	if err != nil {
		return err
	}
	// RANK, with the terms a pond's membership (PondJobIds) brings.
	rank, err := rankOf(cfg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.rank = rank
	s.mu.Unlock()
	ad, err := s.machineAd(cfg)
	if err != nil {
		return err
	}
	epoch, err := readEpoch(cfg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if epoch == 0 {
		// The node follows a central manager without fail-over.
		s.epoch = 0
	} else if epoch > s.epoch {
		s.log.Info("the pool's central manager changed epoch", "epoch", epoch, "was", s.epoch)
		s.epoch = epoch
	}
	if h.end != s.health.end {
		s.log.Info("the machine's end time changed", "end", h.end)
	}
	s.health = h
	if v, ok := s.machine.Lookup("DaemonStartTime"); ok {
		ad.Set("DaemonStartTime", v)
	}
	s.machine = ad
	s.mu.Unlock()
	s.markDirty()
	return nil
}

// ErrStaleEpoch is the reason a startd refuses a claim whose match was
// made by a negotiator of a lower central-manager epoch than the highest
// the startd has seen (see wire.EpochKnob).
var ErrStaleEpoch = errors.New("stale central-manager epoch")

// readEpoch reads wire.EpochKnob: 0 when unset.
func readEpoch(cfg *config.Config) (int64, error) {
	e, err := cfg.Int(wire.EpochKnob, 0)
	if err != nil {
		return 0, err
	}
	if e < 0 {
		return 0, fmt.Errorf("%s = %d: an epoch is 0 or more", wire.EpochKnob, e)
	}
	return int64(e), nil
}

// Epoch returns the highest central-manager epoch the startd has seen.
func (s *Startd) Epoch() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// machineResources returns the cpus, memory (MB) and disk (KB) the startd
// offers.
func (s *Startd) machineResources() (int, int, int64, error) {
	cfg := s.opts.Config
	res, err := cfg.Resources()
	if err != nil {
		return 0, 0, 0, err
	}
	var disk int64 = 1 << 30
	if free, err := hostinfo.DiskFreeKiB(s.executeDir()); err == nil {
		disk = free
	}
	if d, err := cfg.Int("DISK", 0); err == nil && d > 0 {
		disk = int64(d)
	}
	return res.CPUs, res.MemoryMiB, disk, nil
}

func share(spec string, total float64, nslots int) (float64, error) {
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "" || strings.EqualFold(spec, "auto"):
		return total / float64(nslots), nil
	case strings.HasSuffix(spec, "%"):
		f, err := strconv.ParseFloat(strings.TrimSuffix(spec, "%"), 64)
		return total * f / 100, err
	case strings.Contains(spec, "/"):
		a, b, _ := strings.Cut(spec, "/")
		x, err1 := strconv.ParseFloat(a, 64)
		y, err2 := strconv.ParseFloat(b, 64)
		if err := errors.Join(err1, err2); err != nil || y == 0 {
			return 0, fmt.Errorf("bad fraction %q", spec)
		}
		return total * x / y, nil
	}
	return strconv.ParseFloat(spec, 64)
}

func (s *Startd) buildSlots() error {
	cpus, mem, disk, err := s.machineResources()
	if err != nil {
		return err
	}
	s.totalCpus, s.totalMemory = cpus, mem
	types, err := s.opts.Config.SlotTypes()
	if err != nil {
		return fmt.Errorf("slot types: %w", err)
	}
	explicit := false
	if src, ok := s.opts.Config.Source("NUM_SLOTS"); ok && src.File != "<default>" {
		explicit = true
	}
	if len(types) == 1 && types[0].ID == 0 && !explicit {
		// HTCondor 25's default: one partitionable slot with everything.
		types = []config.SlotType{{ID: 1, Count: 1, Partitionable: true, Resources: map[string]string{}}}
	}
	total := 0
	for _, t := range types {
		total += t.Count
	}
	id := 0
	now := time.Now()
	for _, t := range types {
		for i := 0; i < t.Count; i++ {
			id++
			c, err := share(t.Resources["cpus"], float64(cpus), total)
			if err != nil {
				return fmt.Errorf("SLOT_TYPE_%d cpus: %w", t.ID, err)
			}
			m, err := share(t.Resources["memory"], float64(mem), total)
			if err != nil {
				return fmt.Errorf("SLOT_TYPE_%d memory: %w", t.ID, err)
			}
			d, err := share(t.Resources["disk"], float64(disk), total)
			if err != nil {
				return fmt.Errorf("SLOT_TYPE_%d disk: %w", t.ID, err)
			}
			sl := &slot{id: id, name: fmt.Sprintf("slot%d@%s", id, s.opts.Name), partitionable: t.Partitionable,
				cpus: max(1, int(c)), memory: int(m), disk: int64(d), state: "Unclaimed", activity: "Idle",
				entered: now, claimID: newClaimID(), children: map[string]*slot{}}
			sl.totalCpus, sl.totalMemory, sl.totalDisk = sl.cpus, sl.memory, sl.disk
			s.slots = append(s.slots, sl)
			s.claims[sl.claimID] = sl
		}
	}
	return nil
}

// slotAd renders a slot's ad; s.mu must be held.
func (s *Startd) slotAd(sl *slot) *classad.Ad {
	ad := s.machine.Copy()
	ad.SetString("Name", sl.name)
	ad.SetInt("SlotID", int64(sl.id))
	ad.SetInt("Cpus", int64(sl.cpus))
	ad.SetInt("Memory", int64(sl.memory))
	ad.SetInt("Disk", sl.disk)
	ad.SetInt("TotalSlotCpus", int64(sl.totalCpus))
	ad.SetInt("TotalSlotMemory", int64(sl.totalMemory))
	ad.SetInt("TotalSlotDisk", sl.totalDisk)
	// The machine's, as HTCondor's: what NUM_CPUS and MEMORY give the
	// startd to divide among its slots.
	ad.SetInt("TotalCpus", int64(s.totalCpus))
	ad.SetInt("TotalMemory", int64(s.totalMemory))
	state, activity := sl.state, sl.activity
	s.healthAttrs(ad)
	if s.quarantine != nil && state == "Unclaimed" && !s.drainingLocked() {
		// As HTCondor shows a slot whose START is false.
		state = "Owner"
	}
	if sl.retiring {
		activity = "Retiring"
	}
	draining := s.drainingLocked() || s.retiring || s.spentLocked()
	if draining {
		// As condor_drain shows it: claimed slots retire, the others are
		// drained and match no job, Drained/Retiring while jobs still run
		// on the machine, Drained/Idle once none does.
		switch {
		case state == "Claimed":
			activity = "Retiring"
		default:
			state, activity = "Drained", "Idle"
			if s.jobsRunLocked() {
				activity = "Retiring"
			}
		}
	}
	if sl.phase != "" && state == "Claimed" {
		// The job had its soft kill (Vacating) or was killed (Killing).
		state, activity = "Preempting", sl.phase
	}
	ad.SetBool("Draining", draining)
	s.drainAttrsLocked(ad)
	ad.SetString("State", state)
	ad.SetString("Activity", activity)
	ad.SetInt("EnteredCurrentState", sl.entered.Unix())
	ad.SetInt("EnteredCurrentActivity", sl.entered.Unix())
	ad.SetBool("PartitionableSlot", sl.partitionable)
	ad.SetBool("DynamicSlot", sl.parent != nil)
	switch {
	case sl.partitionable:
		ad.SetString("SlotType", "Partitionable")
		ad.SetInt("NumDynamicSlots", int64(len(sl.children)))
	case sl.parent != nil:
		ad.SetString("SlotType", "Dynamic")
		ad.SetInt("DSlotId", int64(sl.sub))
	default:
		ad.SetString("SlotType", "Static")
	}
	if state == "Claimed" && !sl.partitionable {
		ad.SetReal("CurrentRank", s.currentRankLocked(sl, ad))
		if sl.job != nil && sl.activity == "Busy" {
			// As HTCondor's: how long the job may still run once
			// preempted; the negotiator preempts no dynamic slot of a
			// partitionable slot whose job has retirement time left.
			left := time.Until(sl.entered.Add(s.retirementLocked(ad, sl.job)))
			ad.SetInt("RetirementTimeRemaining", max(int64(math.Ceil(left.Seconds())), 0))
		}
		if sl.job == nil && sl.claimJob != nil {
			user, _ := sl.claimJob.EvalAttr("User").StringValue()
			ad.SetString("RemoteUser", user)
		}
	}
	if state == "Claimed" && sl.limits != "" {
		ad.SetString("ConcurrencyLimits", sl.limits)
	}
	if state == "Claimed" && !sl.partitionable {
		// As HTCondor's: the accounting group submitter the claim
		// runs for (group.user@domain), whose group quota the
		// negotiator charges it to.
		job := sl.job
		if job == nil {
			job = sl.claimJob
		}
		if job != nil {
			if g, ok := job.EvalAttr("AccountingGroup").StringValue(); ok && g != "" {
				user, _ := job.EvalAttr("User").StringValue()
				if at := strings.LastIndexByte(user, '@'); at >= 0 {
					g += user[at:]
				}
				ad.SetString("AccountingGroup", g)
			}
		}
	}
	if sl.job != nil {
		owner, _ := sl.job.EvalAttr("Owner").StringValue()
		ad.SetString("RemoteOwner", owner)
		// As HTCondor's: the job's user (owner@uid-domain), whose
		// priority the negotiator compares when it preempts.
		user, _ := sl.job.EvalAttr("User").StringValue()
		ad.SetString("RemoteUser", firstNonEmpty(user, owner))
		ad.SetString("ClientMachine", sl.scheddName)
		if sl.jobID != "" {
			ad.SetString("JobId", sl.jobID)
			ad.SetString("GlobalJobId", sl.scheddName+"#"+sl.jobID)
		}
	}
	return ad
}

// Slots returns the current ads of every slot (partitionable, static and
// dynamic), ordered by name.
func (s *Startd) Slots() []*classad.Ad {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*classad.Ad
	for _, sl := range s.slots {
		out = append(out, s.slotAd(sl))
		kids := make([]*slot, 0, len(sl.children))
		for _, c := range sl.children {
			kids = append(kids, c)
		}
		sort.Slice(kids, func(i, j int) bool { return kids[i].sub < kids[j].sub })
		for _, c := range kids {
			out = append(out, s.slotAd(c))
		}
	}
	return out
}

// setAddress sets the attributes of ad that name the startd's address.
func setAddress(ad *classad.Ad, addr string) {
	ad.SetString("StartdIpAddr", "<"+addr+">")
	ad.SetString("MyAddress", "<"+addr+">")
	ad.SetString("PondAddress", addr)
}

// Address is the node's API address the startd advertises and names in
// its job reports.
func (s *Startd) Address() string { return *s.addr.Load() }

// SetAddress changes the address the startd advertises (its slot ads'
// MyAddress, StartdIpAddr and PondAddress) and names in its job reports,
// for a node whose address changed at run time (a worker whose relay gave
// it another API port): the collector has the new ads at once, and the
// schedd of each running job follows the address of its next report.
func (s *Startd) SetAddress(addr string) {
	if addr == "" {
		return
	}
	s.mu.Lock()
	old := s.addr.Swap(&addr)
	if *old == addr {
		s.mu.Unlock()
		return
	}
	m := s.machine.Copy()
	setAddress(m, addr)
	s.machine = m
	s.mu.Unlock()
	s.log.Info("the startd's address changed", "address", addr, "was", *old)
	s.markDirty()
}

func (s *Startd) source() string { return "startd@" + s.opts.Name }

func (s *Startd) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

// activityUpdate is how often, at most, the slots are advertised for a
// change of a claimed slot's Activity alone: a claim running short jobs
// one after another goes Busy and Idle for each, and the negotiator needs
// neither (a claimed slot is matched or preempted by its State and its
// claim's user, not by its Activity).
const activityUpdate = time.Second

// markActivity says that a claimed slot's Activity changed, and nothing
// else of the slots: they are advertised within activityUpdate.
func (s *Startd) markActivity() {
	select {
	case s.activity <- struct{}{}:
	default:
	}
}

// Invalidate withdraws the slots' ads from the collector at addr.
func (s *Startd) Invalidate(ctx context.Context, addr string) error {
	if addr == "" {
		return nil
	}
	return s.peer(addr).Collector().Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeMachine, Source: s.source()})
}

// Run advertises the slots every UPDATE_INTERVAL (all of them) and soon
// after each change (those whose ads changed) until ctx ends; it then
// kills running jobs and withdraws the ads.
func (s *Startd) Run(ctx context.Context) error {
	t := time.NewTicker(s.update)
	defer t.Stop()
	var lastAd time.Time
	// activityDue fires when a change of Activity alone is to be
	// advertised; nil when none waits.
	var activityDue <-chan time.Time
	var activityAt time.Time // when the last such change was told
	// An update the collector did not take is sent again soon, not at
	// the next refresh: a node whose first update failed (a central
	// manager too busy to answer in time) would stay out of its pool
	// for UPDATE_INTERVAL.
	var retryDue <-chan time.Time
	backoff := retry.New(updateRetry, s.update)
	advertise := func(full bool) {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		// Before the slots are read: a change told after this is not
		// taken for advertised.
		lastAd = time.Now()
		err := s.advertise(actx, full)
		switch {
		case err == nil:
			backoff.Succeeded()
			retryDue = nil
		case ctx.Err() == nil:
			d := backoff.Failed()
			s.log.Warn("updating collector; trying again", "collector", s.opts.Collector(), "err", err, "retry", d.Round(time.Millisecond))
			retryDue = time.After(d)
		}
	}
	advertise(true)
	sweep := time.NewTicker(max(min(s.idleMax/4, idleClaimCheck), 100*time.Millisecond))
	defer sweep.Stop()
	healthCheck := time.NewTicker(healthInterval)
	defer healthCheck.Stop()
	checking := make(chan struct{}, 1)
	for {
		select {
		case <-sweep.C:
			s.releaseIdleClaims()
			select {
			case checking <- struct{}{}:
				go func() {
					defer func() { <-checking }()
					s.releaseForgottenClaims(ctx)
				}()
			default: // the previous check still waits for a schedd
			}
		case <-ctx.Done():
			s.shutdown()
			if s.cont.mgr != nil {
				s.cont.mgr.Close()
			}
			if s.ownExecute {
				_ = os.RemoveAll(s.execute)
			}
			ictx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = s.Invalidate(ictx, s.opts.Collector())
			cancel()
			return nil
		case <-healthCheck.C:
			s.checkHealth()
		case <-t.C:
			// The periodic refresh: every slot's ad, which also
			// repairs what an update lost.
			advertise(true)
		case <-retryDue:
			// What the collector holds is unknown: every ad goes.
			advertise(true)
		case <-s.dirty:
			// Coalesce bursts of changes; only the slots whose ads
			// changed go.
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			advertise(false)
		case <-s.activity:
			// A claimed slot's Activity alone: advertised with the next
			// update, or activityUpdate after the last one.
			activityAt = time.Now()
			if activityDue == nil {
				activityDue = time.After(time.Until(lastAd.Add(activityUpdate)))
			}
		case <-activityDue:
			activityDue = nil
			switch {
			case !activityAt.After(lastAd):
				// Advertised meanwhile, the change with it.
			case time.Since(lastAd) >= activityUpdate:
				advertise(false)
			default:
				activityDue = time.After(time.Until(lastAd.Add(activityUpdate)))
			}
		}
	}
}

// updateRetry is the first delay before a failed update of the
// collector is made again; it doubles with each failure in a row, up to
// UPDATE_INTERVAL.
const updateRetry = 2 * time.Second

// releaseIdleClaims releases claims that have run no job for
// CLAIM_IDLE_TIMEOUT, such as those of a schedd that died. A claim whose
// job's end is being reported is not idle: its schedd starts the next job
// once it has applied the report, however long that took.
func (s *Startd) releaseIdleClaims() {
	s.mu.Lock()
	defer s.mu.Unlock()
	cutoff := time.Now().Add(-s.idleMax)
	for _, sl := range s.claims {
		if !sl.partitionable && sl.state == "Claimed" && sl.run == nil && !sl.reporting && !sl.receiving() && idleSince(sl).Before(cutoff) {
			s.log.Info("releasing idle claim", "slot", sl.name)
			s.releaseLocked(sl)
		}
	}
}

// idleSince is when the claim of slot sl went idle: its last job's end,
// or the schedd's answer to its report when that came later.
func idleSince(sl *slot) time.Time {
	if sl.answered.After(sl.entered) {
		return sl.answered
	}
	return sl.entered
}

func (s *Startd) shutdown() {
	s.mu.Lock()
	s.closed = true
	s.closeResidentsLocked("")
	var runs []*run
	for _, sl := range s.claims {
		if sl.run != nil {
			runs = append(runs, sl.run)
		}
	}
	s.mu.Unlock()
	s.cancel()
	for _, r := range runs {
		r.kill("startd shutting down")
	}
	s.wg.Wait()
	s.dropSpares()
}

// SetCollector is called on reconfig after the collector address changed:
// the startd withdraws its ads from the old collector and advertises to the
// new one.
func (s *Startd) SetCollector(ctx context.Context, old string) {
	if old != "" && old != s.opts.Collector() {
		// After any update to the old collector still on its way, so
		// that it cannot bring the withdrawn ads back (canceled: an old
		// collector that does not answer holds up nothing); updates from
		// now on go to the new one.
		s.advMu.Lock()
		if s.advTo == old && s.advStop != nil {
			s.advStop()
		}
		s.advMu.Unlock()
		s.adv.Lock()
		//lint:ignore SA2001 the empty section waits for an update in flight
		s.adv.Unlock()
		// The new collector hears of the slots while the old one is
		// told to forget them.
		s.markDirty()
		err := s.Invalidate(ctx, old)
		if err != nil {
			s.log.Warn("withdrawing ads from old collector", "collector", old, "err", err)
		}
		return
	}
	s.markDirty()
}

// Claim grants a claim on the slot the request names.
func (s *Startd) Claim(ctx context.Context, req *wire.ClaimRequest) (*wire.ClaimResponse, error) {
	job, err := wire.ToClassAd(req.Job)
	if err != nil {
		return nil, fmt.Errorf("%w: job ad: %w", wire.ErrBadRequest, err)
	}
	if len(req.Preempts) > 0 {
		return s.pslotPreemptClaim(ctx, req, job)
	}
	if resp, handled, err := s.preemptClaim(ctx, req, job); handled {
		return resp, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: startd is shutting down", wire.ErrConflict)
	}
	if s.drainingLocked() {
		return nil, fmt.Errorf("%w: the machine is draining", wire.ErrConflict)
	}
	sl := s.claims[req.ClaimID]
	if sl == nil {
		return nil, fmt.Errorf("%w: unknown claim id", wire.ErrNotFound)
	}
	if req.Epoch < s.epoch {
		s.log.Warn("refused a claim of a replaced central manager", "slot", sl.name, "schedd", req.ScheddName,
			"claim_epoch", req.Epoch, "epoch", s.epoch)
		return nil, fmt.Errorf("%w: %w: the match is of central-manager epoch %d, the pool is at epoch %d",
			wire.ErrConflict, ErrStaleEpoch, req.Epoch, s.epoch)
	}
	if err := s.refusalLocked(job); err != nil {
		return nil, err
	}
	ad := s.slotAd(sl)
	if !classad.EvalWith(s.start, ad, job).IsTrue() {
		return nil, fmt.Errorf("%w: slot %s: START rejects the job", wire.ErrConflict, sl.name)
	}
	if !classad.Match(job, ad) {
		return nil, fmt.Errorf("%w: slot %s does not match the job", wire.ErrConflict, sl.name)
	}
	if !sl.partitionable {
		if sl.state != "Unclaimed" {
			return nil, fmt.Errorf("%w: slot %s is %s", wire.ErrConflict, sl.name, sl.state)
		}
		s.claimSlot(sl, req)
		sl.claimJob = job
		return &wire.ClaimResponse{ClaimID: sl.claimID, Slot: wire.FromClassAd(s.slotAd(sl))}, nil
	}
	return s.carveLocked(sl, req, job, ad)
}

// requestOf is what a job asks of a partitionable slot (ad): cpus, memory
// (MB) and disk (KB), at least 1 of each.
func requestOf(job, ad *classad.Ad) (cpus, mem int, disk int64) {
	cpus = max(int(math.Ceil(job.EvalNumber("RequestCpus", ad, 1))), 1)
	mem = max(int(math.Ceil(job.EvalNumber("RequestMemory", ad, 128))), 1)
	disk = max(int64(math.Ceil(job.EvalNumber("RequestDisk", ad, 1024))), 1)
	return cpus, mem, disk
}

// carveLocked claims a new dynamic slot of the partitionable slot sl
// (whose ad is ad) for job; s.mu must be held.
func (s *Startd) carveLocked(sl *slot, req *wire.ClaimRequest, job, ad *classad.Ad) (*wire.ClaimResponse, error) {
	cpus, mem, disk := requestOf(job, ad)
	if cpus > sl.cpus || mem > sl.memory || disk > sl.disk {
		return nil, fmt.Errorf("%w: slot %s has %d cpus, %d MB, %d KB left; job requests %d, %d MB, %d KB",
			wire.ErrConflict, sl.name, sl.cpus, sl.memory, sl.disk, cpus, mem, disk)
	}
	s.nextDyn[sl.id]++
	sub := s.nextDyn[sl.id]
	d := &slot{id: sl.id, sub: sub, name: fmt.Sprintf("slot%d_%d@%s", sl.id, sub, s.opts.Name), parent: sl,
		cpus: cpus, memory: mem, disk: disk, totalCpus: sl.totalCpus, totalMemory: sl.totalMemory,
		totalDisk: sl.totalDisk, claimID: newClaimID()}
	sl.cpus -= cpus
	sl.memory -= mem
	sl.disk -= disk
	sl.children[d.name] = d
	s.claims[d.claimID] = d
	s.claimSlot(d, req)
	d.claimJob = job
	s.markDirty()
	return &wire.ClaimResponse{ClaimID: d.claimID, Slot: wire.FromClassAd(s.slotAd(d))}, nil
}

func (s *Startd) claimSlot(sl *slot, req *wire.ClaimRequest) {
	if req.Epoch > s.epoch {
		s.epoch = req.Epoch
	}
	sl.state, sl.activity, sl.entered = "Claimed", "Idle", time.Now()
	sl.schedd, sl.scheddName = req.Schedd, req.ScheddName
	sl.limits, _ = classad.UnquoteString(req.Job["ConcurrencyLimits"])
	sl.preemptID = newClaimID()
	s.markDirty()
}

// Release returns a claimed slot: a dynamic slot's resources go back to its
// partitionable slot; a static slot becomes Unclaimed with a new claim id.
func (s *Startd) Release(ctx context.Context, req *wire.ReleaseRequest) (struct{}, error) {
	s.mu.Lock()
	sl := s.claims[req.ClaimID]
	if sl == nil || sl.partitionable {
		s.mu.Unlock()
		return struct{}{}, fmt.Errorf("%w: unknown claim id", wire.ErrNotFound)
	}
	r := sl.run
	s.mu.Unlock()
	if r != nil {
		r.kill("claim released")
		<-r.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(sl)
	return struct{}{}, nil
}

func (s *Startd) releaseLocked(sl *slot) {
	if sl.preempting != nil {
		// The old claim ends: the slot is the preempting claim's.
		s.freeForPreemptionLocked(sl)
		return
	}
	sl.preemptID, sl.claimJob, sl.retiring = "", nil, false
	sl.evicting, sl.phase = nil, ""
	s.closeResidentsLocked(sl.claimID)
	delete(s.claims, sl.claimID)
	s.dropStageLocked(sl)
	if p := sl.parent; p != nil {
		if _, ok := p.children[sl.name]; ok {
			delete(p.children, sl.name)
			p.cpus += sl.cpus
			p.memory += sl.memory
			p.disk += sl.disk
		}
	} else {
		sl.claimID = newClaimID()
		s.claims[sl.claimID] = sl
		sl.state, sl.activity, sl.entered = "Unclaimed", "Idle", time.Now()
		sl.job, sl.jobID = nil, ""
	}
	sl.retire = false
	s.markDirty()
}

// Vacate stops the job running under a claim.
func (s *Startd) Vacate(ctx context.Context, req *wire.VacateRequest) (struct{}, error) {
	s.mu.Lock()
	sl := s.claims[req.ClaimID]
	var r *run
	if sl != nil && !sl.partitionable && (req.JobID == "" || sl.jobID == req.JobID) {
		r = sl.run
	}
	s.mu.Unlock()
	if sl == nil {
		return struct{}{}, fmt.Errorf("%w: unknown claim id", wire.ErrNotFound)
	}
	if r != nil {
		r.vacated.Store(true)
		r.kill("vacated by the schedd")
		<-r.done
	}
	return struct{}{}, nil
}

// ClaimInfo answers whether a claim exists and runs a job.
func (s *Startd) ClaimInfo(ctx context.Context, req *wire.ClaimInfoRequest) (*wire.ClaimInfoResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.claims[req.ClaimID]
	if sl == nil || sl.partitionable {
		return &wire.ClaimInfoResponse{Machine: s.opts.Name}, nil
	}
	if req.Schedd != "" && req.ScheddName != "" && req.ScheddName == sl.scheddName && req.Schedd != sl.schedd {
		// The claim's schedd, restarted at another address: the claim id
		// it knows proves who it is.
		s.log.Info("the claim's schedd moved", "slot", sl.name, "from", sl.schedd, "to", req.Schedd)
		sl.schedd = req.Schedd
	}
	return &wire.ClaimInfoResponse{Exists: true, JobID: sl.jobID, Active: sl.run != nil || sl.reporting, Machine: s.opts.Name}, nil
}

// Handler serves the startd's endpoints relative to its mount point: claim,
// activate, release, vacate, claiminfo, transfer (input files), quarantine
// and drain.
func (s *Startd) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/claim", wire.Handle(s.Claim))
	mux.Handle("/activate", wire.Handle(s.Activate))
	mux.Handle("/release", wire.Handle(s.Release))
	mux.Handle("/vacate", wire.Handle(s.Vacate))
	mux.Handle("/claiminfo", wire.Handle(s.ClaimInfo))
	mux.Handle("/transfer", http.HandlerFunc(s.ReceiveInput))
	mux.Handle("/joboutput", wire.Handle(s.JobOutput))
	mux.Handle("/quarantine", wire.Handle(s.QuarantineCall))
	mux.Handle("/drain", wire.Handle(s.DrainCall))
	return mux
}

// peer returns a wire client of the node whose API is at addr, with the
// pool token and the sea's TLS.
func (s *Startd) peer(addr string) *wire.Client {
	return wire.NewClient(addr, s.opts.token()).WithTLS(s.opts.TLS)
}
