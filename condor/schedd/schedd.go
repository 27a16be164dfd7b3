// Package schedd is pond's schedd: it keeps the job queue (condor/jobqueue,
// durable across kill -9), accepts submissions from members of its pool,
// advertises itself and its submitters to the collector, runs the jobs the
// negotiator matches through a shadow per job that claims the slot,
// transfers files to and from the starter and writes the job event log, and
// reuses a claim for the next matching idle job.
package schedd

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/internal/retry"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// Options configure a Schedd.
type Options struct {
	Config  *config.Config
	Name    string // schedd name (default the host name)
	Address string // this node's API address
	DataDir string // SPOOL is DataDir/spool unless configured
	// Token gives the token the schedd presents to the other daemons (nil:
	// none, for an open pool); it is called for each call, so that a
	// refreshed token is used at once.
	Token func() string
	// TLS is the sea's TLS other nodes' daemons are called with; nil
	// speaks plain HTTP.
	TLS *tls.Config
	// Collector returns the central manager's address (CONDOR_HOST); it may
	// change at run time.
	Collector func() string
	Logger    *slog.Logger
	Now       func() time.Time
	// Account resolves a job's Owner to the local account whose rights a
	// schedd running as root reads and writes the job's files with; a nil
	// account stands for the schedd's own rights. The default is the
	// account of that name (asuser.Lookup). Tests map made-up owners.
	Account func(owner string) (*asuser.Account, error)
	// FlockTargets lists the pools the schedd may flock its idle jobs
	// to, nearest first (nil: none); it may change at run time.
	FlockTargets func() []FlockTarget
}

// token is the token to present now ("" for none).
func (o *Options) token() string {
	if o.Token == nil {
		return ""
	}
	return o.Token()
}

// Schedd is a running schedd.
type Schedd struct {
	opts  Options
	log   *slog.Logger
	q     *jobqueue.Queue
	now   func() time.Time
	lease time.Duration
	// alive and claimLease are the claim lease (startd.ClaimLease).
	alive, claimLease time.Duration
	// maxExceptions is MAX_SHADOW_EXCEPTIONS: a job whose shadow failed
	// more often is held.
	maxExceptions int
	uid           string
	// asRoot: the schedd runs as root and reads and writes jobs' files
	// with their owners' rights (jobAccount).
	asRoot bool
	// adv serializes updates and invalidations: an update in flight to
	// a collector the schedd is leaving lands before the invalidation.
	adv sync.Mutex
	// clock times the schedd's ads (DaemonStartTime, the duty cycle); adv
	// guards it.
	clock adClock
	// advTo and advStop are the collector an update in flight goes to and
	// what cancels it: a move away from a collector that does not answer
	// need not wait for that update's timeout.
	advMu   sync.Mutex
	advTo   string
	advStop context.CancelFunc

	// regroup serializes the filing of idle jobs in new autoclusters.
	regroup sync.Mutex
	mu      sync.Mutex
	idle    *idleSet                  // idle jobs not being started
	active  map[jobqueue.JobID]*claim // jobs being started or running
	claims  map[string]*claim         // claim id -> claim
	// claiming are the claim ids of static slots matched to a job whose
	// shadow neither holds the claim yet nor has given it up (shadow.go).
	claiming map[string]bool
	dirty    chan struct{}
	wake     chan struct{} // reschedule request to the negotiator
	fac      factories     // job factories (factory.go)
	sem      chan struct{} // bounds concurrent shadows' calls
	// starting counts the shadows starting their job (holding sem) or
	// waiting their turn to; Matches leaves a match for a later cycle
	// once maxWaitingShadows wait. Under mu.
	starting int
	probes   chan struct{} // bounds the probes of silent workers (lost.go)
	wg       sync.WaitGroup
	stopped  bool
	// jobs parses the ads of the jobs the schedd reads one at a time
	// (parseJob): the jobs of a cluster share most attribute texts.
	jobs sharedParser
	// accounts are the jobs' owners' accounts (opts.Account), kept for
	// PASSWD_CACHE_REFRESH.
	accounts *asuser.Cache
	// asUser runs what the schedd does with an owner's rights (its
	// job logs, input and output files) on threads kept for the owner.
	asUser *asuser.Threads
	logMu  sync.Mutex
	logs   map[string]*joblog.Writer
	// ending are the jobs whose terminated event is being written
	// between their completion and their move to the history (complete);
	// under mu.
	ending map[jobqueue.JobID]bool
	// finals are the final reports being applied or applied lately, by
	// claim and job, and finalsSwept when those long applied were last
	// forgotten (report.go); under mu.
	finals      map[finalKey]*finalReport
	finalsSwept time.Time
	// lostMu orders a lost node's disconnected events before the
	// reconnected events of its claims.
	lostMu sync.Mutex
	// staged holds the outputs received under each claim until the
	// job's final report; downloads bounds how many arrive at once
	// (MAX_CONCURRENT_DOWNLOADS).
	staged    map[stageKey]map[string]*stagedOut
	downloads chan struct{}
	// done ends with the schedd: it stops transfers in progress.
	done       context.Context
	cancelDone context.CancelFunc
	// ckpt keeps the checkpoints of self-checkpointing jobs in the spool.
	ckpt *ckptSpool
	// deferred are the idle jobs waiting for their deferral_time
	// (deferral.go), guarded by mu.
	deferred deferrals
	// fl is the schedd's flocking, guarded by mu.
	fl flockState
	// lim are the limits of the queue and of job starts (Reconfig);
	// gate, guarded by mu, admits job starts; submitLim orders submits.
	lim       atomic.Pointer[limits]
	gate      startGate
	submitLim submitLimits
	// local are the scheduler- and local-universe jobs the schedd runs
	// itself (local.go).
	local localJobs
	// notify delivers job notifications (notify.go).
	notify *notifier
	// streamed are the streams of running jobs (stream_output) whose
	// file this claim began, guarded by mu (stream.go).
	streamed map[streamKey]bool
	// metrics are the schedd's counters and histograms (metrics.go).
	metrics *scheddMetrics
	// idleLoaded is closed once the idle jobs of the queue are filed as
	// the schedd starts (loadIdle), or their filing was given up when the
	// schedd closed; cancelLoad gives it up.
	idleLoaded chan struct{}
	cancelLoad context.CancelFunc
}

// claim is a slot the schedd holds, idle or running one job.
type claim struct {
	id string
	// startd is the startd's address when the claim was made; moved the
	// one its reports named since, when it changed (addr).
	startd   string
	moved    atomic.Pointer[string]
	slotName string
	slot     *classad.Ad
	job      jobqueue.JobID
	ad       *classad.Ad // the running job's ad

	busy     bool
	deadline time.Time // lease of a job recovered after a restart; zero otherwise
	// recovered is when the claim was recovered after a restart; zero
	// otherwise.
	recovered time.Time
	verified  bool // the startd confirmed the recovered claim runs the job
	// pending, when not nil, is the activation of the claim's job whose
	// answer never came (unanswered.go): the job stays Running, as a
	// recovered one, until its startd says whether it took it.
	pending *pendingActivation
	// contact is when the startd last showed the running job's claim
	// alive (activation, a report); zero before the job runs.
	contact time.Time
	// lost is when the sea said the claim's node was gone; zero otherwise.
	// seaLost says the sea said so while the claim ran its job, and stays
	// set when a report brings the node back (it may have come as the
	// node's agent went): nothing listening at the startd's address then
	// says the agent is dead (workerDead).
	lost    time.Time
	seaLost bool
	// lease is the running job's lease (jobLease): how long its startd
	// keeps it without contact. probing says whether the schedd is asking
	// the startd, past the claim lease, whether the worker is dead
	// (lost.go), probed when it last asked; unreachable says the schedd
	// logged that it waits.
	lease       time.Duration
	probing     bool
	probed      time.Time
	unreachable bool
	// receiving counts the job's outputs arriving, committing its final
	// reports being applied: the claim's lease holds meanwhile.
	receiving, committing int
	// outputStarted says the job log has the job's output transfer
	// started; outputErr is why an output could not be stored, for the
	// final report to hold the job with.
	outputStarted bool
	outputErr     string
	// stopInputs, while the job's input files are being sent, gives the
	// transfer up (the node is gone); inputBytes is what they weighed.
	stopInputs context.CancelFunc
	inputBytes int64
	// pool is the pool the claim's slot belongs to when the schedd
	// flocked the job there; "" in the schedd's own pool.
	pool string
	// committedWall is how much of the job's run on the claim (wall
	// seconds) its CommittedTime already counts: the run up to its last
	// checkpoint.
	committedWall float64
	// execute is the Execute event of the job being activated or run on
	// the claim, written once the startd accepted the job (executeLog);
	// nil on a claim recovered after a restart, whose job's event was
	// written before.
	execute *executeLog
	// vacated is the job the schedd last had the claim's startd stop
	// (vacateJob). A vacate that reached the startd before the job's
	// activation found nothing to stop: the job, removed or held while
	// its activation was on its way, is stopped again once the startd
	// has taken it.
	vacated jobqueue.JobID
}

// addr is the address of the claim's startd now.
func (c *claim) addr() string {
	if m := c.moved.Load(); m != nil {
		return *m
	}
	return c.startd
}

// New opens the job queue and recovers the claims of jobs that were
// running when the schedd last stopped.
func New(ctx context.Context, opts Options) (*Schedd, error) {
	if opts.Config == nil {
		opts.Config = config.New(config.Options{})
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		opts.Name, _ = os.Hostname()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Collector == nil {
		opts.Collector = func() string { return "" }
	}
	if opts.Account == nil {
		opts.Account = asuser.Lookup
	}
	m := newMetrics()
	q, err := openQueue(ctx, opts, m.commit.Observe)
	if err != nil {
		return nil, err
	}
	lease, err := opts.Config.Duration("JOB_LEASE_DURATION", startd.DefaultJobLease)
	if err != nil {
		q.Close()
		return nil, fmt.Errorf("JOB_LEASE_DURATION: %w", err)
	}
	alive, claimLease, err := startd.ClaimLease(opts.Config)
	if err != nil {
		q.Close()
		return nil, err
	}
	// The owners' accounts are kept for PASSWD_CACHE_REFRESH, as
	// HTCondor's daemons keep them: every event of a job is written to
	// its log as its owner.
	refresh, err := passwdCacheRefresh(opts.Config)
	if err != nil {
		q.Close()
		return nil, err
	}
	accounts := asuser.NewCache(opts.Account, refresh, opts.Now)
	downloads, err := opts.Config.Int("MAX_CONCURRENT_DOWNLOADS", 100)
	if err != nil || downloads < 1 {
		q.Close()
		return nil, fmt.Errorf("MAX_CONCURRENT_DOWNLOADS: want a positive count: %v", firstNonNil(err, downloads))
	}
	maxExceptions, err := opts.Config.Int("MAX_SHADOW_EXCEPTIONS", DefaultMaxShadowExceptions)
	if err == nil && maxExceptions < 0 {
		err = fmt.Errorf("MAX_SHADOW_EXCEPTIONS: %d is negative", maxExceptions)
	}
	if err != nil {
		q.Close()
		return nil, err
	}
	lim, err := loadLimits(opts.Config)
	if err != nil {
		q.Close()
		return nil, err
	}
	ckpt, err := newCkptSpool(spoolDir(opts), opts.Config)
	if err != nil {
		q.Close()
		return nil, err
	}
	uid, _ := opts.Config.Get("UID_DOMAIN")
	notify, err := loadNotifier(opts.Config, opts.Logger.With("daemon", "schedd"), firstNonEmpty(uid, opts.Name))
	if err != nil {
		q.Close()
		return nil, err
	}
	s := &Schedd{accounts: accounts, asUser: asuser.NewThreads(asUserIdle), ckpt: ckpt, alive: alive, claimLease: claimLease, maxExceptions: maxExceptions, opts: opts, log: opts.Logger.With("daemon", "schedd"), q: q, now: opts.Now, lease: lease,
		uid: firstNonEmpty(uid, opts.Name), asRoot: os.Geteuid() == 0, idle: newIdleSet(),
		active: map[jobqueue.JobID]*claim{}, claims: map[string]*claim{}, claiming: map[string]bool{}, dirty: make(chan struct{}, 1), probes: make(chan struct{}, maxProbes),
		fac:  factories{m: map[int]*submit.Factory{}, kick: make(chan struct{}, 1)},
		wake: make(chan struct{}, 1), sem: make(chan struct{}, 64), logs: map[string]*joblog.Writer{}, ending: map[jobqueue.JobID]bool{}, finals: map[finalKey]*finalReport{},
		staged: map[stageKey]map[string]*stagedOut{}, downloads: make(chan struct{}, downloads), notify: notify,
		streamed: map[streamKey]bool{}, metrics: m}
	s.lim.Store(lim)
	s.done, s.cancelDone = context.WithCancel(context.Background())
	if err := s.recover(ctx); err != nil {
		q.Close()
		return nil, err
	}
	if err := s.replayOutbox(ctx); err != nil {
		q.Close()
		return nil, err
	}
	// The jobs whose end was written but not yet moved when the schedd
	// stopped leave the queue now, not at the next periodic pass.
	s.retireCompleted(ctx)
	// The idle jobs, which may be many, are filed while the daemons
	// start and serve; the negotiator's requests wait for them (Idle).
	lctx, cancelLoad := context.WithCancel(context.WithoutCancel(ctx))
	s.cancelLoad, s.idleLoaded = cancelLoad, make(chan struct{})
	go func() {
		defer close(s.idleLoaded)
		s.loadIdle(lctx, 5*time.Second)
	}()
	return s, nil
}

// updateRetry is the first delay before a failed update of the
// collector is made again; it doubles with each failure in a row, up to
// UPDATE_INTERVAL.
const updateRetry = 2 * time.Second

// DefaultMaxShadowExceptions is HTCondor's default MAX_SHADOW_EXCEPTIONS.
const DefaultMaxShadowExceptions = 2

// openQueue opens the job queue in SPOOL (DataDir/spool unless
// configured), with JOB_QUEUE_SYNCHRONOUS.
// onCommit observes each commit's latency (seconds).
func openQueue(ctx context.Context, opts Options, onCommit func(float64)) (*jobqueue.Queue, error) {
	spool := spoolDir(opts)
	// The queue holds every job's ad: not for jobs or other users to read.
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return nil, fmt.Errorf("creating spool directory: %w", err)
	}
	sync := "NORMAL"
	if v, _ := opts.Config.Get("JOB_QUEUE_SYNCHRONOUS"); strings.EqualFold(v, "FULL") {
		sync = "FULL"
	}
	q, err := jobqueue.OpenWith(ctx, filepath.Join(spool, "job_queue.db"), jobqueue.Options{Synchronous: sync, Now: opts.Now,
		OnCommit: func(d time.Duration) { onCommit(d.Seconds()) }})
	if err != nil {
		return nil, fmt.Errorf("opening job queue: %w", err)
	}
	return q, nil
}

// spoolDir is SPOOL: DataDir/spool unless configured.
func spoolDir(opts Options) string {
	if v, ok := opts.Config.Get("SPOOL"); ok && v != "" && opts.DataDir == "" {
		return v
	}
	return filepath.Join(opts.DataDir, "spool")
}

func firstNonNil(err error, v any) any {
	if err != nil {
		return err
	}
	return v
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Queue returns the schedd's job queue.
func (s *Schedd) Queue() *jobqueue.Queue { return s.q }

func (s *Schedd) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

func (s *Schedd) reschedule() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run advertises the schedd and its submitters every UPDATE_INTERVAL and
// soon after changes, asks the negotiator for a cycle after new idle jobs,
// and expires the leases of recovered jobs, until ctx ends.
func (s *Schedd) Run(ctx context.Context) error {
	update, err := s.opts.Config.Duration("UPDATE_INTERVAL", 300*time.Second)
	if err != nil {
		return fmt.Errorf("UPDATE_INTERVAL: %w", err)
	}
	policy, err := loadPeriodicPolicy(s.opts.Config)
	if err != nil {
		return err
	}
	s.wg.Add(4)
	go s.historyLoop(ctx)
	go s.periodicLoop(ctx, policy)
	go s.factoryLoop(ctx)
	go s.notify.run(s.done, &s.wg)
	t := time.NewTicker(update)
	defer t.Stop()
	sweep := time.NewTicker(time.Second)
	defer sweep.Stop()
	flock := time.NewTicker(flockInterval)
	defer flock.Stop()
	s.runLocalJobs(ctx)
	// An update the collector did not take is made again soon, not at
	// the next UPDATE_INTERVAL: the negotiator learns of idle jobs from
	// the submitter ads.
	var retryDue <-chan time.Time
	backoff := retry.New(updateRetry, update)
	advertise := func() {
		if s.advertise(ctx) {
			backoff.Succeeded()
			retryDue = nil
		} else if ctx.Err() == nil {
			retryDue = time.After(backoff.Failed())
		}
	}
	advertise()
	lastAd := time.Now()
	s.mu.Lock()
	anyIdle := s.idle.len() > 0
	s.mu.Unlock()
	if anyIdle {
		s.reschedule()
	}
	for {
		select {
		case <-ctx.Done():
			s.stop()
			return nil
		case <-t.C:
			advertise()
		case <-retryDue:
			advertise()
		case <-s.dirty:
			// At most one update a second for changes.
			select {
			case <-ctx.Done():
			case <-time.After(max(100*time.Millisecond, time.Until(lastAd.Add(time.Second)))):
			}
			advertise()
			lastAd = time.Now()
		case <-s.wake:
			advertise()
			s.askCycle(ctx)
		case <-flock.C:
			s.flock(ctx)
		case <-sweep.C:
			s.expireLeases(ctx)
			s.expireClaims(ctx)
			s.sweepStaged()
			s.sweepCheckpoints(ctx)
		}
	}
}

// stop waits for the shadows and withdraws the schedd's ads.
func (s *Schedd) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	// The filing of the idle jobs ends first: it may start local jobs.
	s.cancelLoad()
	<-s.idleLoaded
	s.stopLocalJobs()
	s.cancelDone()
	s.wg.Wait()
	s.sweepStaged()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.invalidate(ctx, s.opts.Collector())
	s.withdrawFlocks(ctx)
}

// askCycle asks the negotiator for a negotiation cycle.
func (s *Schedd) askCycle(ctx context.Context) {
	cm := s.opts.Collector()
	if cm == "" {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.peer(cm).Negotiator().Reschedule(rctx); err != nil && ctx.Err() == nil {
		s.log.Debug("asking negotiator for a cycle", "err", err)
	}
}

// Close stops the filing of the idle jobs if it still runs and closes the
// job queue; call it after Run returned.
func (s *Schedd) Close() error {
	s.cancelLoad()
	<-s.idleLoaded
	s.asUser.Close()
	return s.q.Close()
}

// asUserIdle is how long a thread kept to act as an owner waits for the
// owner's next file operation before it ends (asuser.Threads).
const asUserIdle = 30 * time.Second

// Handler serves the schedd's endpoints relative to its mount point.
func (s *Schedd) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/newcluster", wire.Handle(s.NewCluster))
	mux.Handle("/submit", wire.Handle(s.Submit))
	mux.Handle("/submitfactory", wire.Handle(s.SubmitFactory))
	mux.Handle("/newclusters", wire.Handle(s.NewClusters))
	mux.Handle("/submitbatch", wire.Handle(s.SubmitBatch))
	mux.Handle("/submitdigest", wire.Handle(s.SubmitDigest))
	mux.Handle("/query", wire.Handle(s.QueryJobs))
	mux.Handle("/querystream", wire.HandleStream(s.EachJob))
	mux.Handle("/summary", wire.Handle(s.QueueSummary))
	mux.Handle("/act", wire.Handle(s.Act))
	mux.Handle("/history", wire.Handle(s.History))
	mux.Handle("/idle", wire.Handle(s.Idle))
	mux.Handle("/matches", wire.Handle(s.Matches))
	mux.Handle("/jobreport", wire.Handle(s.JobReport))
	mux.Handle("/claiminfo", wire.Handle(s.ClaimInfo))
	mux.Handle("/transfer", http.HandlerFunc(s.ReceiveOutput))
	mux.Handle("/streamoutput", wire.Handle(s.StreamOutput))
	mux.Handle("/tail", wire.Handle(s.Tail))
	return mux
}

func parseJobID(s string) (jobqueue.JobID, error) {
	id, err := jobqueue.ParseJobID(s)
	if err != nil {
		return id, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	return id, nil
}

// peer returns a wire client of the node whose API is at addr, with the
// pool token and the sea's TLS.
func (s *Schedd) peer(addr string) *wire.Client {
	return wire.NewClient(addr, s.opts.token()).WithTLS(s.opts.TLS)
}
