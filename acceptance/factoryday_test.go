package acceptance

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/overlay/sim"
)

// factoryDayEnv runs TestFactoryDayFigures and names the scaled hour.
const factoryDayEnv = "POND_FACTORY_FIGURES"

// factoryDayArrivals is the day's workload: the jobs submitted in each of
// its six hours, few at the start and the end, most at midday, each hour
// spread evenly.
var factoryDayArrivals = []int{3, 6, 10, 12, 8, 4}

// factoryDayJob is one short job that only a glidein of the entry runs.
const factoryDayJob = `executable          = /bin/sleep
arguments           = 5
transfer_executable = false
requirements        = IsGlidein =?= true && Site == "hpc"
request_memory      = 16
log                 = jobs.log
queue
`

// factoryDayConfig is a one-node pool whose central manager's pilot factory
// keeps glideins on the Slurm cluster: at most four, one slot each.
const factoryDayConfig = `
pond {
  backend "local" { path = "pond.state" }
}

provider "local" {
  bind_address = "127.0.0.1"
}

%s

pool "campus" {
  provider = provider.local
  nodes    = 1
  config = {
    NEGOTIATOR_INTERVAL   = "2"
    POND_FACTORY_INTERVAL = "2s"
    UPDATE_INTERVAL       = "1"
  }
}

glidein "hpc" {
  provider     = provider.slurm
  pool         = pool.campus.central_manager
  lifetime     = "1h"
  idle_timeout = %q
  max_jobs     = %d
  cm_timeout   = "2m"
  slots        = 1
  memory       = "512MB"
  attributes   = { Site = "hpc" }

  factory {
    max_queued           = 4
    max_running          = 4
    max_submit_per_cycle = 4
  }
}

output "cm" {
  value = pool.campus.central_manager
}
`

// factoryDayMode is one way of running the day's jobs.
type factoryDayMode struct {
	name string
	// idleTimeout is the glideins' idle_timeout.
	idleTimeout string
	// maxJobs is the entry's max_jobs: 1 is a glidein per job, which
	// leaves once its job is done; 0 no limit.
	maxJobs int
}

// factoryDayModes are the two modes of the figures: the factory keeping
// glideins for the idle jobs, bound late (a glidein runs job after job
// while there are any, and leaves a minute idle), and a glidein per job
// (max_jobs = 1: each glidein runs one job and leaves once it is done; one
// that got none leaves a minute idle). The test logs how many glideins
// ran the day's jobs.
var factoryDayModes = []factoryDayMode{
	{name: "factory, late binding", idleTimeout: "60s"},
	{name: "a glidein per job", idleTimeout: "60s", maxJobs: 1},
}

// procSample is one reading of a process: its CPU time and its children's
// that it reaped (utime, stime, cutime, cstime, in ticks of 10 ms) and its
// resident memory.
type procSample struct {
	ticks int64
	rssKB int64
}

// readProc reads /proc/PID/stat and /proc/PID/status.
func readProc(pid int) (procSample, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, err
	}
	// The fields after the command, which is in parentheses: utime is
	// the 14th of the line, the 12th after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procSample{}, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procSample{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var s procSample
	for _, k := range []int{11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return procSample{}, fmt.Errorf("/proc/%d/stat: field %d: %w", pid, k+3, err)
		}
		s.ticks += v
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, err
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			s.rssKB, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return procSample{}, fmt.Errorf("/proc/%d/status: VmRSS %q: %w", pid, v, err)
			}
		}
	}
	return s, nil
}

// TestFactoryDayFigures draws the PanDA pilot factory paper's Figures 5
// and 6 time-scaled: a day of six hours of short jobs, each hour a minute
// (or POND_FACTORY_FIGURES seconds), run on a real Slurm cluster through
// the pool's pilot factory in each of factoryDayModes, while the central
// manager's agent, where the factory runs, is read every second: its CPU
// (with the sbatch, squeue and sacct it ran and reaped) and its resident
// memory, and the jobs done. It writes docs/sim/paper_panda_factory_*.csv;
// the charts are drawn from them (go test ./overlay/sim -run TestPlots
// -sim.plots). About thirteen minutes, as root:
//
//	go build -o bin/pondctl ./cmd/pondctl && POND_FACTORY_FIGURES=60 POND_BIN=$PWD/bin/pondctl \
//	  go test -count=1 -run TestFactoryDayFigures -timeout 60m -v ./acceptance/
func TestFactoryDayFigures(t *testing.T) {
	env := os.Getenv(factoryDayEnv)
	if env == "" {
		t.Skipf("set %s to the seconds of a scaled hour (60) to run the day and write docs/sim/paper_panda_factory_*.csv", factoryDayEnv)
	}
	secs, err := strconv.Atoi(env)
	if err != nil || secs < 5 || secs > 3600 {
		t.Fatalf("%s=%q: want the seconds of a scaled hour, 5 to 3600", factoryDayEnv, env)
	}
	hour := time.Duration(secs) * time.Second
	s := slurmSite(t, slurmtest.Options{Nodes: 2, CPUs: 2, MemoryMB: 2000})
	var cpu, mem, done []sim.Series
	for _, m := range factoryDayModes {
		c, r, d := runFactoryDay(t, s, m, hour)
		cpu, mem, done = append(cpu, c), append(mem, r), append(done, d)
	}
	for _, f := range []struct {
		file, y string
		series  []sim.Series
	}{
		{"paper_panda_factory_cpu.csv", "cpu_percent", cpu},
		{"paper_panda_factory_mem.csv", "rss_mib", mem},
		{"paper_panda_factory_jobs.csv", "jobs_done", done},
	} {
		var b bytes.Buffer
		if err := sim.WriteSeriesCSV(&b, "scaled_hour", f.y, f.series); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "docs", "sim", f.file)
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
}

// runFactoryDay runs the day's jobs in mode m on a pool of its own and
// returns the series of the agent's CPU (percent of one core), resident
// memory (MiB) and the jobs done, against the scaled hour.
func runFactoryDay(t *testing.T, s glideinSite, m factoryDayMode, hour time.Duration) (cpu, mem, done sim.Series) {
	t.Helper()
	cpu, mem, done = sim.Series{Name: m.name}, sim.Series{Name: m.name}, sim.Series{Name: m.name}
	w := newWorkdir(t, "")
	w.env = append(w.env, s.env...)
	w.write("main.pond.hcl", fmt.Sprintf(factoryDayConfig, s.provider, m.idleTimeout, m.maxJobs))
	glideinsBefore := len(s.jobs(t))
	w.expect(0, "apply", "-auto-approve")
	defer w.expect(0, "destroy", "-auto-approve")
	cm := w.output("cm")
	var pid int
	for _, p := range agentPIDs(w.dir) {
		if !isGlideinAgent(p) {
			if pid != 0 {
				t.Fatalf("two agents in %s: %d and %d", w.dir, pid, p)
			}
			pid = p
		}
	}
	if pid == 0 {
		t.Fatalf("no central manager agent in %s", w.dir)
	}
	total := 0
	for _, n := range factoryDayArrivals {
		total += n
	}
	logPath := filepath.Join(w.dir, "jobs.log")
	jobsDone := func() int {
		b, _ := os.ReadFile(logPath)
		return bytes.Count(b, []byte("\n005 ("))
	}

	// Every second: the agent's CPU since the last reading, its memory,
	// the jobs done; until the day is over and every job done (or four
	// hours past the day).
	began := time.Now()
	day := time.Duration(len(factoryDayArrivals)) * hour
	var sampleErr error
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		prev, err := readProc(pid)
		if err != nil {
			sampleErr = err
			return
		}
		last := began
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for now := range tick.C {
			cur, err := readProc(pid)
			if err != nil {
				sampleErr = err
				return
			}
			x := now.Sub(began).Seconds() / hour.Seconds()
			x = float64(int(x*1000+0.5)) / 1000
			dt := now.Sub(last).Seconds()
			cpu.Points = append(cpu.Points, [2]float64{x, float64(cur.ticks-prev.ticks) / dt})
			mem.Points = append(mem.Points, [2]float64{x, float64(cur.rssKB) / 1024})
			n := jobsDone()
			done.Points = append(done.Points, [2]float64{x, float64(n)})
			prev, last = cur, now
			if now.Sub(began) >= day && n >= total || now.Sub(began) >= day+4*hour {
				return
			}
		}
	}()

	// The arrivals, each hour's spread evenly over it.
	submitted := 0
	for h, n := range factoryDayArrivals {
		for i := range n {
			at := began.Add(time.Duration(h)*hour + time.Duration(i)*hour/time.Duration(n) + hour/time.Duration(2*n))
			time.Sleep(time.Until(at))
			name := fmt.Sprintf("job%d.sub", submitted)
			w.write(name, factoryDayJob)
			w.expect(0, "condor", "submit", "-pool", cm, name)
			submitted++
		}
	}
	<-sampled
	if sampleErr != nil {
		t.Fatalf("reading agent %d: %v", pid, sampleErr)
	}
	n := jobsDone()
	glideins := len(s.jobs(t)) - glideinsBefore
	var cpuSum, rssMax float64
	for i, p := range cpu.Points {
		cpuSum += p[1]
		rssMax = max(rssMax, mem.Points[i][1])
	}
	t.Logf("%s: %d of %d jobs done in %s, %d glideins submitted; agent CPU %.1f s in all, %.1f%% of a core on average, resident at most %.0f MiB",
		m.name, n, submitted, time.Since(began).Round(time.Second), glideins, cpuSum/100, cpuSum/float64(len(cpu.Points)), rssMax)
	if n != total {
		t.Errorf("%s: %d of %d jobs done by %s past the day", m.name, n, total, 4*hour)
	}
	if m.maxJobs > 0 && glideins*m.maxJobs < total {
		t.Errorf("%s: %d glideins of max_jobs %d ran %d jobs", m.name, glideins, m.maxJobs, total)
	}
	if len(cpu.Points) < int(day/time.Second)-2 {
		t.Errorf("%s: %d samples over %s, want one a second", m.name, len(cpu.Points), day)
	}
	return cpu, mem, done
}

// isGlideinAgent reports whether process pid is an agent run as a glidein.
func isGlideinAgent(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && slices.Contains(strings.Split(string(raw), "\x00"), "-glidein")
}
