package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
)

// BenchmarkDAGOverhead measures what the DAG manager adds to N trivial
// jobs (/bin/true): each iteration runs them as one cluster (submitted at
// once, timed until the last one's terminate event is in its log) and as
// a DAG of N independent nodes (condor dagman run, timed from its start
// to its exit), on a one-node pool of 16 slots. It reports both times,
// the DAG's overhead in percent of the cluster's time and the CPU time
// of the DAG manager's process (dag-cpu-s), and the pool's agents' CPU time per job either way (cluster-agents-cpu-ms/job, dag-agents-cpu-ms/job: the figures to compare on a loaded machine); ns/op is the DAG's time. N is 200 by default (50 with -short); POND_BENCH_DAG_NODES=10000 sets it:
//
//	make build && POND_BENCH_DAG_NODES=10000 POND_BIN=$PWD/bin/pondctl go test -run '^$' -bench DAGOverhead -benchtime 1x -timeout 60m ./acceptance/
func BenchmarkDAGOverhead(b *testing.B) {
	def := 200
	if testing.Short() {
		def = 50
	}
	n := benchSizes(b, "POND_BENCH_DAG_NODES", []int{def}, 1)[0]
	b.StopTimer()
	w := newBenchWorkdir(b)
	w.write("main.pond.hcl", strings.Replace(dagPool, "slots  = 4", "slots  = 16", 1))
	if r := w.run("apply", "-auto-approve"); r.code != 0 {
		b.Fatalf("creating the pool: %s", r)
	}
	defer w.run("destroy", "-auto-approve")
	cm := w.output("cm")
	pids := agentPIDs(w.dir)
	if len(pids) == 0 {
		b.Fatal("no agent of the pool found running")
	}
	var dagT, clusterT, dagCPU, clusterAgents, dagAgents time.Duration
	for i := range b.N {
		// The jobs as one cluster.
		log := fmt.Sprintf("cluster%d.log", i)
		w.write(fmt.Sprintf("c%d.sub", i), fmt.Sprintf("executable = /bin/true\nlog = %s\nqueue %d\n", log, n))
		agents0 := agentsCPUTime(b, pids)
		start := time.Now()
		if r := w.run("condor", "submit", "-pool", cm, fmt.Sprintf("c%d.sub", i)); r.code != 0 {
			b.Fatalf("condor submit: %s", r)
		}
		eventually(b, time.Duration(n)*time.Second+time.Minute, func() error {
			if got := terminated(filepath.Join(w.dir, log)); got < n {
				return fmt.Errorf("%d of %d jobs ended", got, n)
			}
			return nil
		})
		clusterT += time.Since(start)
		clusterAgents += agentsCPUTime(b, pids) - agents0
		// The same jobs as a DAG.
		var dag strings.Builder
		for k := range n {
			fmt.Fprintf(&dag, "JOB N%d true.sub\n", k)
		}
		w.write("true.sub", "executable = /bin/true\nqueue\n")
		file := fmt.Sprintf("d%d.dag", i)
		w.write(file, dag.String())
		agents0 = agentsCPUTime(b, pids)
		start = time.Now()
		b.StartTimer()
		r := w.runFor(3*time.Minute+time.Duration(n)*150*time.Millisecond, "condor", "dagman", "run", "-pool", cm, file)
		b.StopTimer()
		dagT += time.Since(start)
		dagAgents += agentsCPUTime(b, pids) - agents0
		dagCPU += r.cpu
		if r.code != 0 {
			b.Fatalf("the DAG failed: %s", r.stderr)
		}
		if got := terminated(filepath.Join(w.dir, file+".nodes.log")); got != n {
			b.Fatalf("%d node jobs ended, want %d", got, n)
		}
	}
	b.ReportMetric(clusterT.Seconds()/float64(b.N), "cluster-s")
	b.ReportMetric(dagT.Seconds()/float64(b.N), "dag-s")
	b.ReportMetric(100*(dagT.Seconds()-clusterT.Seconds())/clusterT.Seconds(), "overhead-%")
	b.ReportMetric(dagCPU.Seconds()/float64(b.N), "dag-cpu-s")
	b.ReportMetric(float64(n), "nodes")
	jobs := float64(n * b.N)
	b.ReportMetric(float64(clusterAgents.Microseconds())/1000/jobs, "cluster-agents-cpu-ms/job")
	b.ReportMetric(float64(dagAgents.Microseconds())/1000/jobs, "dag-agents-cpu-ms/job")
}

// terminated counts the terminate events of the job event log at path.
func terminated(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	evs, _ := joblog.ReadAll(f, time.Local)
	n := 0
	for _, ev := range evs {
		if ev.Type == joblog.Terminated {
			n++
		}
	}
	return n
}
