package acceptance

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/sim"
)

var lendersTable = flag.Bool("lenders.table", false, "run the lenders table with real agents at full size (some 10 minutes) and log its rows (docs/flocks.md)")

// lendersTableModes are the three runs of the lenders table, as the
// simulator's (overlay/sim TestLendersSim).
var lendersTableModes = []string{"no flocking", "flocking", "lenders first"}

// lendersTableInterval is the pools' NEGOTIATOR_INTERVAL and
// FLOCK_IDLE_TIME, the simulator's step and idle time.
const lendersTableInterval = 2 * time.Second

// lendersTableConfig is the flock paper's Table 1 in the shape of the
// simulator's lenders table (overlay/sim lendersConfig), scaled down to
// pools of 3 slots and jobs of runtime on average (the simulator's hour),
// D's burst 6 runtimes of its slots. Full, the jobs arrive for 12
// runtimes, as the simulator's, and pool C (outside the flock) shows that
// nothing touches it; otherwise for 4 runtimes, without C.
func lendersTableConfig(mode string, full bool, runtime time.Duration) sim.LendersConfig {
	pools := []sim.LendersPool{
		{Name: "a", Slots: 3, Load: 0.5, Flocks: true},
		{Name: "b", Slots: 3, Load: 0.5, Flocks: true},
		{Name: "c", Slots: 3, Load: 0.5},
		{Name: "d", Slots: 3, Load: 0.8, Burst: 18, Flocks: true},
	}
	arrivals := 12 * runtime
	if !full {
		pools = append(pools[:2], pools[3])
		arrivals = 4 * runtime
	}
	return sim.LendersConfig{
		Pools: pools, Runtime: runtime, Arrivals: arrivals, Step: lendersTableInterval, IdleTime: lendersTableInterval,
		Flock: mode != "no flocking", LendersFirst: mode == "lenders first", Seed: 1,
	}
}

// lendersTableHCL declares cfg's pools, one node of Slots slots each, and,
// when cfg flocks, a flock from each flocking pool to the others, with
// lenders first as cfg says.
func lendersTableHCL(cfg sim.LendersConfig) string {
	var b strings.Builder
	b.WriteString("pond {\n  backend \"local\" {\n    path = \"pond.state\"\n  }\n}\n\nprovider \"local\" {}\n")
	secs := int(lendersTableInterval / time.Second)
	for _, p := range cfg.Pools {
		fmt.Fprintf(&b, `
pool %q {
  provider      = provider.local
  nodes         = 1
  slots         = %d
  lenders_first = %t
  config        = { NEGOTIATOR_INTERVAL = "%d", FLOCK_IDLE_TIME = "%d", POND_FLOCK_INTERVAL = "%ds" }
}

output %q {
  value = pool.%s.central_manager
}
`, p.Name, p.Slots, cfg.LendersFirst, secs, secs, secs, p.Name, p.Name)
	}
	if !cfg.Flock {
		return b.String()
	}
	for _, p := range cfg.Pools {
		if !p.Flocks {
			continue
		}
		var to []string
		for _, q := range cfg.Pools {
			if q.Flocks && q.Name != p.Name {
				to = append(to, "pool."+q.Name+".central_manager")
			}
		}
		fmt.Fprintf(&b, "\nflock %q {\n  from = [pool.%s.central_manager]\n  to   = [%s]\n}\n", p.Name, p.Name, strings.Join(to, ", "))
	}
	return b.String()
}

// lendersTableRow is what one pool's job log says of its jobs.
type lendersTableRow struct {
	jobs int
	// mean and max of the jobs' waits: their time idle, from submission
	// to the execution that ran them to the end, less the time they ran
	// before an eviction.
	mean, max time.Duration
	// flocked counts the executions in another pool's slots, evicted the
	// evictions (004).
	flocked, evicted int
}

// lendersTableMeasure reads the job log of pool's jobs and fails the test
// unless each of the n jobs it lists ended exactly once.
func lendersTableMeasure(t *testing.T, path, pool string, n int) lendersTableRow {
	t.Helper()
	evs, _, err := joblog.ReadFile(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	type job struct {
		idleSince      time.Time
		waited         time.Duration
		running, ended int
	}
	jobs := map[string]*job{}
	row := lendersTableRow{}
	for _, ev := range evs {
		j := jobs[ev.ID()]
		if j == nil && ev.Type != joblog.Submit {
			t.Errorf("%s: %s event of job %s before its submission", path, ev.Type, ev.ID())
			continue
		}
		switch ev.Type {
		case joblog.Submit:
			if j != nil {
				t.Errorf("%s: job %s submitted twice", path, ev.ID())
			}
			jobs[ev.ID()] = &job{idleSince: ev.Time}
		case joblog.Execute:
			if j.running > 0 {
				t.Errorf("%s: job %s started while running", path, ev.ID())
			}
			j.running++
			j.waited += ev.Time.Sub(j.idleSince)
			if !strings.Contains(ev.SlotName, "@"+pool+"-") {
				row.flocked++
			}
		case joblog.Evicted:
			j.running--
			j.idleSince = ev.Time
			row.evicted++
		case joblog.Terminated:
			j.running--
			j.ended++
		}
	}
	if len(jobs) != n {
		t.Errorf("%s: %d jobs, want %d", path, len(jobs), n)
	}
	var sum time.Duration
	for id, j := range jobs {
		if j.ended != 1 {
			t.Errorf("%s: job %s ended %d times", path, id, j.ended)
		}
		sum += j.waited
		row.max = max(row.max, j.waited)
	}
	row.jobs = len(jobs)
	if len(jobs) > 0 {
		row.mean = sum / time.Duration(len(jobs))
	}
	return row
}

// lendersTableRun applies cfg's pools in a work directory of its own,
// submits cfg's workload (overlay/sim LendersJobs: each job at its
// arrival, /bin/sleep its runtime) to the pools, waits for every job to
// end, and measures each pool's jobs from its job log.
func lendersTableRun(t *testing.T, cfg sim.LendersConfig) []lendersTableRow {
	t.Helper()
	workload, err := sim.LendersJobs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", lendersTableHCL(cfg))
	w.expect(0, "init")
	w.expect(0, "apply", "-auto-approve")
	cms := make([]string, len(cfg.Pools))
	for i, p := range cfg.Pools {
		if cms[i] = w.output(p.Name); cms[i] == "" {
			t.Fatalf("no central manager for pool %s", p.Name)
		}
	}
	if cfg.Flock {
		// Each flocking pool finds the others willing before the
		// jobs come.
		eventually(t, time.Minute, func() error {
			for i, p := range cfg.Pools {
				if !p.Flocks {
					continue
				}
				var st api.FlockStatus
				if err := w.getJSON(cms[i], "/v1/flock", &st); err != nil {
					return fmt.Errorf("pool %s: %w", p.Name, err)
				}
				seen := map[string]bool{}
				for _, c := range st.Willing {
					seen[c.Pool] = true
				}
				for _, q := range cfg.Pools {
					if q.Flocks && q.Name != p.Name && !seen[q.Name] {
						return fmt.Errorf("pool %s does not find %s willing yet: %+v", p.Name, q.Name, st.Willing)
					}
				}
			}
			return nil
		})
	}
	if err := os.MkdirAll(filepath.Join(w.dir, "jobs"), 0o755); err != nil {
		t.Fatal(err)
	}

	// The workload in submission order; the jobs of a pool due at the
	// same moment (D's burst) go in one submission.
	type batch struct {
		pool int
		at   time.Duration
		secs []string
	}
	sort.SliceStable(workload, func(i, j int) bool { return max(workload[i].Arrival, 0) < max(workload[j].Arrival, 0) })
	var batches []batch
	for _, j := range workload {
		at := max(j.Arrival, 0)
		if n := len(batches); n > 0 && batches[n-1].pool == j.Pool && batches[n-1].at == at {
			batches[n-1].secs = append(batches[n-1].secs, fmt.Sprintf("%.1f", j.Runtime.Seconds()))
			continue
		}
		batches = append(batches, batch{j.Pool, at, []string{fmt.Sprintf("%.1f", j.Runtime.Seconds())}})
	}
	counts := make([]int, len(cfg.Pools))
	for _, j := range workload {
		counts[j.Pool]++
	}
	start := time.Now()
	var late time.Duration
	for k, bt := range batches {
		time.Sleep(time.Until(start.Add(bt.at)))
		late = max(late, time.Since(start.Add(bt.at)))
		name := filepath.Join(w.dir, "jobs", fmt.Sprintf("%03d.sub", k))
		w.write(filepath.Join("jobs", filepath.Base(name)), fmt.Sprintf(
			"executable = /bin/sleep\narguments = $(secs)\nlog = %s.log\nrequest_cpus = 1\nrequest_memory = 16\nqueue secs from (\n%s\n)\n",
			cfg.Pools[bt.pool].Name, strings.Join(bt.secs, "\n")))
		w.expect(0, "condor", "submit", "-pool", cms[bt.pool], name)
	}
	t.Logf("%d jobs submitted in %d submissions over %v, the latest %v late", len(workload), len(batches),
		time.Since(start).Round(time.Second), late.Round(10*time.Millisecond))

	// Every job ends.
	eventually(t, 10*time.Minute, func() error {
		for i, p := range cfg.Pools {
			data, err := os.ReadFile(filepath.Join(w.dir, p.Name+".log"))
			if err != nil {
				return err
			}
			if n := strings.Count(string(data), "\n005 (") + boolInt(strings.HasPrefix(string(data), "005 (")); n < counts[i] {
				return fmt.Errorf("pool %s: %d of %d jobs ended", p.Name, n, counts[i])
			}
		}
		return nil
	})
	t.Logf("every job ended %v after the first submission", time.Since(start).Round(time.Second))
	rows := make([]lendersTableRow, len(cfg.Pools))
	for i, p := range cfg.Pools {
		rows[i] = lendersTableMeasure(t, filepath.Join(w.dir, p.Name+".log"), p.Name, counts[i])
		// And once in the schedd's history.
		r := w.expect(0, "condor", "history", "-pool", cms[i], "-af", "ClusterId", "ProcId")
		seen := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				seen[f[0]+"."+f[1]]++
			}
		}
		if len(seen) != counts[i] {
			t.Errorf("pool %s: %d jobs in the history, want %d", p.Name, len(seen), counts[i])
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("pool %s: job %s is %d times in the history", p.Name, id, n)
			}
		}
	}
	return rows
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lendersTableSim runs cfg in the simulator, as rows.
func lendersTableSim(t *testing.T, cfg sim.LendersConfig) []lendersTableRow {
	t.Helper()
	reps, err := sim.Lenders(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]lendersTableRow, len(reps))
	for i, r := range reps {
		rows[i] = lendersTableRow{jobs: r.Jobs, mean: r.MeanWait, max: r.MaxWait, flocked: r.Flocked, evicted: r.Preempted}
	}
	return rows
}

// lendersTableLine is one line of the table of docs/flocks.md: D's mean
// and max wait, A's, B's and C's mean (max), D's runs flocked and
// evicted; waits in seconds.
func lendersTableLine(label string, cfg sim.LendersConfig, rows []lendersTableRow) string {
	s := func(x time.Duration) string { return fmt.Sprintf("%.1f", x.Seconds()) }
	cols := map[string]string{}
	var d lendersTableRow
	for i, p := range cfg.Pools {
		cols[p.Name] = fmt.Sprintf("%s (%s)", s(rows[i].mean), s(rows[i].max))
		if p.Name == "d" {
			d = rows[i]
		}
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %d | %d |", label, s(d.mean), s(d.max), cols["a"], cols["b"], cols["c"], d.flocked, d.evicted)
}

// lendersTableCheck fails the test unless the rows keep the lenders
// table's orders: flocking cuts D's worst wait by a quarter or more, and
// flocking with lenders first cuts it too; with lenders first A's and B's
// mean waits stay within about a negotiation cycle (two, and a second) of
// theirs without flocking, and some of D's flocked jobs are evicted for them; no job is
// evicted but with lenders first (where a lender's job flocked to another
// lender may be too).
func lendersTableCheck(t *testing.T, cfg sim.LendersConfig, rows [][]lendersTableRow) {
	t.Helper()
	none, fl, lf := rows[0], rows[1], rows[2]
	for i, p := range cfg.Pools {
		if n := none[i].evicted + fl[i].evicted; n != 0 {
			t.Errorf("pool %s's jobs evicted %d times without lenders first", p.Name, n)
		}
		switch {
		case p.Name == "d":
			if fl[i].max*4 > none[i].max*3 || lf[i].max >= none[i].max {
				t.Errorf("D's worst wait: %v without flocking, %v flocking, %v with lenders first", none[i].max, fl[i].max, lf[i].max)
			}
			if fl[i].flocked == 0 || lf[i].flocked == 0 {
				t.Errorf("D's jobs flocked %d times, %d with lenders first", fl[i].flocked, lf[i].flocked)
			}
			if lf[i].evicted == 0 {
				t.Errorf("with lenders first, no job of the lenders took a slot back from D's (none of D's was evicted)")
			}
		case p.Flocks:
			// The cycle that finds the lender's job, the flocked
			// job's vacating and the new claim (about another), and a
			// second for the log's whole seconds.
			if slack := 2*lendersTableInterval + time.Second; lf[i].mean > none[i].mean+slack {
				t.Errorf("lender %s waits %v on average with lenders first, %v without flocking", p.Name, lf[i].mean, none[i].mean)
			}
		}
	}
}

// lendersTableRuns runs the three modes of the lenders table (at once,
// unless full), logs their rows with the simulator's of the same
// workload, and checks their orders.
func lendersTableRuns(t *testing.T, full bool, runtime time.Duration) {
	rows := make([][]lendersTableRow, len(lendersTableModes))
	t.Run("modes", func(t *testing.T) {
		tests := map[string]func(t *testing.T){}
		for m, mode := range lendersTableModes {
			run := func(t *testing.T) { rows[m] = lendersTableRun(t, lendersTableConfig(mode, full, runtime)) }
			if full {
				t.Run(strings.ReplaceAll(mode, " ", "_"), run)
			} else {
				tests[strings.ReplaceAll(mode, " ", "_")] = run
			}
		}
		runAtOnce(t, tests)
	})
	if t.Failed() {
		return
	}
	cfg := lendersTableConfig("", full, runtime)
	t.Log("| | D mean | D max | A mean (max) | B mean (max) | C mean (max) | D's runs flocked | D's runs preempted |")
	for m, mode := range lendersTableModes {
		t.Log(lendersTableLine("agents: "+mode, cfg, rows[m]))
	}
	for m, mode := range lendersTableModes {
		var runs []string
		for i, p := range cfg.Pools {
			runs = append(runs, fmt.Sprintf("%s %d jobs, %d runs flocked, %d evicted", p.Name, rows[m][i].jobs, rows[m][i].flocked, rows[m][i].evicted))
		}
		t.Logf("agents: %s: %s", mode, strings.Join(runs, "; "))
	}
	for _, mode := range lendersTableModes {
		c := lendersTableConfig(mode, full, runtime)
		t.Log(lendersTableLine("simulator: "+mode, c, lendersTableSim(t, c)))
	}
	lendersTableCheck(t, cfg, rows)
}

// TestFlockLendersTable runs the flock paper's Table 1 with real agents,
// small: pools A, B and D of 3 slots each (one agent apiece), D with a
// burst of 18 jobs and load 0.8, A and B at 0.5, jobs of 6 s on average
// (exponential, overlay/sim LendersJobs, seed 1) arriving for 24 s, a
// negotiation cycle and FLOCK_IDLE_TIME of 2 s; three ways at once (each
// in pools of its own): no flocking, flocking, flocking with lenders
// first. Each job's wait is measured from its pool's job log. Flocking
// cuts D's worst wait; with lenders first the lenders wait about as
// without flocking; every job ends once.
func TestFlockLendersTable(t *testing.T) {
	t.Parallel()
	lendersTableRuns(t, false, 6*time.Second)
}

// TestFlockLendersTableFigures runs the table of docs/flocks.md with
// -lenders.table: TestFlockLendersTable's pools with C (outside the
// flock), D's burst 18 jobs, jobs of 10 s on average arriving for 2
// minutes, one mode after the other.
func TestFlockLendersTableFigures(t *testing.T) {
	if !*lendersTable {
		t.Skip("run with -lenders.table")
	}
	lendersTableRuns(t, true, 10*time.Second)
}
