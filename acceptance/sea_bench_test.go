package acceptance

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// The query every method answers: among the nodes that declare Bench, the
// k with the highest BenchRank. Agent i of a sea of N has BenchRank = i,
// so the right answer is the last k agents.
const (
	seaBenchReq  = "Bench == true"
	seaBenchRank = "BenchRank"
	seaBenchK    = 10
)

// BenchmarkSeaQuery measures finding the best 10 nodes by Rank in a sea of
// N real agent processes, three ways, on the same sea:
//
//   - method=tree: a PonD tree query (POST /v1/query at a random agent).
//   - method=serf: serf's own broadcast query (POST /v1/match at a random
//     agent): gossiped to every member, every member answers the origin,
//     which keeps the best k.
//   - method=collector: one central collector holding every node's machine
//     ad (each agent's startd reports to the first agent's collector); the
//     query is the Requirements as a constraint there, and the Rank sort
//     done by the asker over the returned ads.
//
// Metrics: p50-ms and p99-ms (wall time at the asker, including the HTTP
// request to the root, origin or collector), msgs/query, complete-% (the
// share of the sea the answer speaks for), topk-ok-% (queries whose best k
// are exactly the right ones), cpu-ms/agent/s and rss-MiB/agent over the
// sea's agents while the method runs, and load1 at the start.
//
// Sizes default to 64, 256 and 512; SEABENCH_SIZES=64,128 overrides them,
// SEABENCH_TLS=1 gives every agent a certificate of a sea's CA (mutual
// TLS for the API, the daemons and the tree queries) and a node token,
// and has the API answer only tokens, as the local provider's agents do, SEABENCH_PROFILE the gossip profile (default
// lan, the agents' own
// default: the tighter probe timeouts of the fast profile make a sea of
// hundreds on two cores suspect its own members). Run it with the
// built binary, for example:
//
//	make build && POND_BIN=$PWD/bin/pondctl go test -run '^$' -bench SeaQuery -benchtime 100x -timeout 60m ./acceptance/
func BenchmarkSeaQuery(b *testing.B) {
	sizes := benchSizes(b, "SEABENCH_SIZES", []int{64, 256, 512}, seaBenchK)
	profile := os.Getenv("SEABENCH_PROFILE")
	if profile == "" {
		profile = "lan"
	}
	withTLS := os.Getenv("SEABENCH_TLS") == "1"
	for _, n := range sizes {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			s := startBenchSea(b, n, profile, withTLS)
			b.Logf("sea of %d agents (%s profile) ready in %s; load average %s", n, profile, s.ready.Round(time.Second), loadAvg())
			idle := s.cpuOver(3 * time.Second)
			b.Logf("idle sea: %.2f cpu-ms/agent/s, %.1f rss-MiB/agent", idle, s.rssMiB())
			b.Run("method=tree", func(b *testing.B) { s.bench(b, idle, s.treeQuery) })
			b.Run("method=serf", func(b *testing.B) { s.bench(b, idle, s.serfQuery) })
			b.Run("method=collector", func(b *testing.B) { s.bench(b, idle, s.collectorQuery) })
		})
	}
}

// benchSea is a sea of agent processes started by a benchmark.
type benchSea struct {
	n       int
	profile string
	dir     string
	agents  []*benchAgent
	ready   time.Duration
	want    []string // the right answer, best first
	rng     *rand.Rand
	// authority issues the agents' certificates, and tls is what the
	// benchmark calls them with; both nil without TLS.
	authority *auth.Authority
	tls       *tls.Config
	token     string
}

// client returns a client of the agent API at addr.
func (s *benchSea) client(addr string) *api.Client {
	return api.NewClient(addr).WithTLS(s.tls).WithToken(s.token)
}

type benchAgent struct {
	name string
	cmd  *exec.Cmd
	info *api.Info
	done chan struct{}
}

// queryResult is what one query found.
type queryResult struct {
	names    []string // best first
	covered  int      // nodes the answer speaks for
	messages int
}

// startBenchSea starts n agents: agent 0 is the central manager (a
// collector and a startd), every other one a startd reporting to it, all of
// them answering tree and serf queries. Joins are staggered (eight starts
// in flight, each joining agent 0 and a random earlier agent); it returns
// once every agent sees all n members and the collector holds n machine
// ads. Every process is killed when the benchmark ends.
func startBenchSea(b *testing.B, n int, profile string, withTLS bool) *benchSea {
	b.Helper()
	raiseFDLimit(b)
	s := &benchSea{n: n, profile: profile, dir: b.TempDir(), rng: rand.New(rand.NewPCG(uint64(n), 42))}
	if withTLS {
		var err error
		if s.authority, err = auth.OpenAuthority(filepath.Join(s.dir, "auth")); err != nil {
			b.Fatal(err)
		}
		// The authority makes its CA with its first certificate.
		if _, _, err := s.authority.IssueCertificate("bench", nil, time.Hour); err != nil {
			b.Fatal(err)
		}
		if s.tls, err = auth.ClientTLS(s.authority.CAFile(), "", ""); err != nil {
			b.Fatal(err)
		}
		if s.token, err = s.authority.Mint("bench", []auth.Scope{auth.SeaAdmin, auth.Administrator}, 4*time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	for i := n - 1; i >= n-seaBenchK; i-- {
		s.want = append(s.want, benchName(i))
	}
	b.Cleanup(s.stop)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	first, err := s.launch(ctx, 0, profile, nil, "")
	if err != nil {
		b.Fatal(err)
	}
	s.agents = append(s.agents, first)
	var mu sync.Mutex
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 1; i < n; i++ {
		sem <- struct{}{}
		mu.Lock()
		join := []string{first.info.Gossip, s.agents[s.rng.IntN(len(s.agents))].info.Gossip}
		mu.Unlock()
		wg.Go(func() {
			defer func() { <-sem }()
			a, err := s.launch(ctx, i, profile, join, first.info.API)
			mu.Lock()
			if a != nil {
				s.agents = append(s.agents, a)
			}
			mu.Unlock()
			if err != nil {
				errs <- err
			}
		})
		if len(errs) > 0 {
			break
		}
		if i%seaBenchWave == 0 {
			// A wave is up: let the sea take it in before the next one.
			// Every join is gossiped to every member; joins that come
			// faster than two cores can spread them starve the failure
			// detectors, which then suspect live members, which makes
			// more gossip.
			wg.Wait()
			if err := s.waitMembers(ctx, first, i+1); err != nil {
				b.Fatal(err)
			}
			waitQuiet(ctx)
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	sort.Slice(s.agents, func(i, j int) bool { return s.agents[i].name < s.agents[j].name })
	b.Logf("%d agents started in %s; waiting for convergence", n, time.Since(start).Round(time.Second))
	if err := s.converge(ctx, b); err != nil {
		b.Fatal(err)
	}
	s.ready = time.Since(start)
	// Measure the sea at rest, not still digesting its own boot.
	waitQuiet(ctx)
	return s
}

// seaBenchWave is how many agents start before the benchmark waits for the
// sea to take them in.
const seaBenchWave = 32

// waitMembers waits until a sees n alive members.
func (s *benchSea) waitMembers(ctx context.Context, a *benchAgent, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		h, err := s.client(a.info.API).Health(ctx)
		if err == nil && h.Members >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s does not see the %d members started so far: %v (%w)", a.name, n, err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitQuiet waits, up to a minute, until the machine's run queue is short
// (fewer runnable threads than four per core, in five samples in a row).
func waitQuiet(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for quiet := 0; quiet < 5; {
		// The fourth field of the load average is runnable/total
		// scheduling entities.
		f := strings.Fields(loadAvg())
		if len(f) < 4 {
			return
		}
		running, _ := strconv.Atoi(strings.Split(f[3], "/")[0])
		if running < 4*runtime.NumCPU() {
			quiet++
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func benchName(i int) string { return fmt.Sprintf("sea%04d", i) }

// launch starts agent i and waits until its API answers.
func (s *benchSea) launch(ctx context.Context, i int, profile string, join []string, cm string) (*benchAgent, error) {
	name := benchName(i)
	dir := filepath.Join(s.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	daemons := "MASTER STARTD"
	role := "node"
	if i == 0 {
		daemons, role = "MASTER COLLECTOR STARTD", "cm"
	}
	cfg := filepath.Join(dir, "condor_config")
	if err := os.WriteFile(cfg, []byte("DAEMON_LIST = "+daemons+"\n"), 0o644); err != nil {
		return nil, err
	}
	args := []string{"agent", "-config", cfg, "-name", name, "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0",
		"-data-dir", dir, "-gossip-profile", profile, "-gossip-compress=false", "-role", role, "-log-level", "warn",
		"-attr", "Bench=true", "-attr", "BenchRank=" + strconv.Itoa(i)}
	if cm != "" {
		args = append(args, "-condor-host", cm)
	}
	for _, j := range join {
		args = append(args, "-join", j)
	}
	if s.authority != nil {
		cert, key, ca, err := s.authority.WriteCertificate(dir, name, []string{"127.0.0.1"}, time.Hour)
		if err != nil {
			return nil, err
		}
		args = append(args, "-tls-cert", cert, "-tls-key", key, "-tls-ca", ca)
		tok, _, err := s.authority.Issue("node/"+name, []auth.Scope{auth.Daemon, auth.SeaRead}, 4*time.Hour)
		if err != nil {
			return nil, err
		}
		tokFile := filepath.Join(dir, "node.token")
		if err := os.WriteFile(tokFile, []byte(tok), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "-trusted-keys", filepath.Join(s.authority.Dir(), auth.TrustedKeysFile),
			"-token-issuer", s.authority.Issuer(), "-token-file", tokFile)
	} else {
		args = append(args, "-insecure-api")
	}
	logf, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(pondBin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Hundreds of agents share two cores: one scheduler thread each
	// spares the kernel most of the wake-ups that a second one costs.
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	// Die with the benchmark even if it is killed before its cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	a := &benchAgent{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(a.done) }()
	for {
		if info, err := api.ReadInfo(dir); err == nil && info.PID == cmd.Process.Pid {
			a.info = info
			return a, nil
		}
		select {
		case <-a.done:
			log, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
			return a, fmt.Errorf("%s exited before it was ready:\n%s", name, log)
		case <-ctx.Done():
			return a, fmt.Errorf("%s not ready: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// converge waits until every agent sees n members and their tree tags,
// and the collector holds n machine ads.
func (s *benchSea) converge(ctx context.Context, b *testing.B) error {
	var last error
	logged := time.Now()
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		last = s.converged(cctx)
		cancel()
		if last == nil {
			return nil
		}
		if time.Since(logged) > 20*time.Second {
			b.Logf("not converged yet: %v (load %s)", last, loadAvg())
			logged = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("the sea of %d did not converge: %w", s.n, last)
}

func (s *benchSea) converged(ctx context.Context) error {
	for _, a := range s.agents {
		h, err := s.client(a.info.API).Health(ctx)
		if err != nil {
			return err
		}
		if h.Members != s.n {
			return fmt.Errorf("%s sees %d members", a.name, h.Members)
		}
	}
	// Members learn each other's tree address from a tag set just after
	// start; check a sample of views.
	for _, i := range []int{0, s.n / 3, s.n / 2, s.n - 1} {
		ms, err := s.client(s.agents[i].info.API).Members(ctx, api.MembersFilter{Status: "alive"})
		if err != nil {
			return err
		}
		withTree := 0
		for _, m := range ms {
			if m.Tags[api.TagTree] != "" {
				withTree++
			}
		}
		if withTree != s.n {
			return fmt.Errorf("%s sees %d members with a tree address", s.agents[i].name, withTree)
		}
	}
	ads, err := s.collectorAds(ctx)
	if err != nil {
		return err
	}
	if len(ads) != s.n {
		return fmt.Errorf("the collector holds %d machine ads", len(ads))
	}
	return nil
}

// stop kills every agent and waits for them.
func (s *benchSea) stop() {
	for _, a := range s.agents {
		_ = a.cmd.Process.Kill()
	}
	for _, a := range s.agents {
		<-a.done
	}
}

// randomAgent is any agent but the central manager.
func (s *benchSea) randomAgent() *benchAgent { return s.agents[1+s.rng.IntN(s.n-1)] }

func (s *benchSea) treeQuery(ctx context.Context) (queryResult, error) {
	ans, err := s.client(s.randomAgent().info.API).Query(ctx, api.Query{
		Requirements: seaBenchReq, Rank: seaBenchRank, K: seaBenchK, Mode: api.BestRank,
	})
	if err != nil {
		return queryResult{}, err
	}
	r := queryResult{covered: ans.Stats.Covered, messages: ans.Stats.Messages}
	for _, m := range ans.Matches {
		r.names = append(r.names, m.Name)
	}
	return r, nil
}

func (s *benchSea) serfQuery(ctx context.Context) (queryResult, error) {
	ans, err := s.client(s.randomAgent().info.API).Match(ctx, api.MatchRequest{
		Requirements: seaBenchReq, Rank: seaBenchRank, K: seaBenchK,
		// The tree query's deadline: what serf has not gathered by then
		// counts as missing.
		Timeout: api.DefaultQueryTimeout,
	})
	if err != nil {
		return queryResult{}, err
	}
	// Serf gossips the query: every member queues it for
	// RetransmitMult x ceil(log10(N+1)) gossip transmissions
	// (RetransmitMult is 4 with the LAN and WAN profiles, 2 with the local
	// and fast ones), then each answers the origin directly.
	mult := 2
	if s.profile == "lan" || s.profile == "wan" {
		mult = 4
	}
	retransmit := mult * int(math.Ceil(math.Log10(float64(s.n+1))))
	r := queryResult{covered: ans.Replies, messages: s.n*retransmit + ans.Replies}
	for _, m := range ans.Matches {
		r.names = append(r.names, m.Name)
	}
	return r, nil
}

func (s *benchSea) collectorAds(ctx context.Context) ([]wire.Ad, error) {
	// Only the attributes the Rank and the answer need travel back.
	req := &wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: seaBenchReq, Projection: []string{"Machine", seaBenchRank}}
	return wire.NewClient(s.agents[0].info.API, s.token).WithTLS(s.tls).Collector().Query(ctx, req)
}

func (s *benchSea) collectorQuery(ctx context.Context) (queryResult, error) {
	ads, err := s.collectorAds(ctx)
	if err != nil {
		return queryResult{}, err
	}
	rank, err := classad.Compile(seaBenchRank)
	if err != nil {
		return queryResult{}, err
	}
	type ranked struct {
		name string
		rank float64
	}
	var all []ranked
	my := classad.NewAd()
	for _, w := range ads {
		ad, err := wire.ToClassAd(w)
		if err != nil {
			return queryResult{}, err
		}
		name, _ := ad.EvalAttr("Machine").StringValue()
		r, _ := rank.EvalNumber(my, ad)
		all = append(all, ranked{name, r})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].rank != all[j].rank {
			return all[i].rank > all[j].rank
		}
		return all[i].name < all[j].name
	})
	r := queryResult{covered: len(all), messages: 2}
	for i := 0; i < len(all) && i < seaBenchK; i++ {
		r.names = append(r.names, all[i].name)
	}
	return r, nil
}

// bench runs query b.N times after a short warm-up and reports the
// metrics.
func (s *benchSea) bench(b *testing.B, idle float64, query func(context.Context) (queryResult, error)) {
	ctx := context.Background()
	load := load1()
	for range 3 {
		if _, err := query(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var (
		lat                 []time.Duration
		covered, msgs, good int
	)
	cpu0, t0 := s.cpuTicks(), time.Now()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		r, err := query(ctx)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		covered += r.covered
		msgs += r.messages
		if slices.Equal(r.names, s.want) {
			good++
		}
	}
	b.StopTimer()
	cpu := s.cpuPerAgent(s.cpuTicks()-cpu0, time.Since(t0))
	slices.Sort(lat)
	q := float64(len(lat))
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]), "p99-ms")
	b.ReportMetric(float64(msgs)/q, "msgs/query")
	b.ReportMetric(100*float64(covered)/q/float64(s.n), "complete-%")
	b.ReportMetric(100*float64(good)/q, "topk-ok-%")
	b.ReportMetric(cpu, "cpu-ms/agent/s")
	b.ReportMetric(idle, "idle-cpu-ms/agent/s")
	b.ReportMetric(s.rssMiB(), "rss-MiB/agent")
	b.ReportMetric(load, "load1")
}

// cpuTicks sums the user and system clock ticks of every agent.
func (s *benchSea) cpuTicks() int64 {
	var total int64
	for _, a := range s.agents {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.cmd.Process.Pid))
		if err != nil {
			continue
		}
		str := string(raw)
		f := strings.Fields(str[strings.LastIndexByte(str, ')')+2:])
		// Fields after the command: state is f[0]; utime and stime are
		// fields 14 and 15 of the whole line, f[11] and f[12] here.
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			total += u + st
		}
	}
	return total
}

// cpuPerAgent converts ticks (USER_HZ, 100 on Linux) over d into CPU
// milliseconds per agent per second.
func (s *benchSea) cpuPerAgent(ticks int64, d time.Duration) float64 {
	return float64(ticks) * 10 / float64(s.n) / d.Seconds()
}

// cpuOver measures the sea's CPU use over an idle period.
func (s *benchSea) cpuOver(d time.Duration) float64 {
	c0, t0 := s.cpuTicks(), time.Now()
	time.Sleep(d)
	return s.cpuPerAgent(s.cpuTicks()-c0, time.Since(t0))
}

// rssMiB is the mean resident set size of the agents.
func (s *benchSea) rssMiB() float64 {
	var total, n int64
	for _, a := range s.agents {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", a.cmd.Process.Pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(raw))
		if len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			total += pages * int64(os.Getpagesize())
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(total) / float64(n) / (1 << 20)
}

// loadAvg is /proc/loadavg: the 1, 5 and 15 minute load averages, then
// runnable/total scheduling entities and the last process ID.
func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(raw))
}

func load1() float64 {
	f := strings.Fields(loadAvg())
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// raiseFDLimit lifts the soft open-file limit to the hard one: each agent
// holds a handful of sockets, and the benchmark keeps connections to many.
func raiseFDLimit(b *testing.B) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Logf("reading the open-file limit: %v", err)
		return
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil && !errors.Is(err, syscall.EPERM) {
			b.Logf("raising the open-file limit: %v", err)
		}
	}
}
