package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/dagman"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
)

// dagGetenv is the environment the DAG manager's job takes from
// submit_dag's, as condor_submit_dag's getenv: what reaches the pool and
// finds the scripts, and pond's own POND_* settings.
const dagGetenv = "CONDOR_CONFIG,_CONDOR_*,PATH,PYTHONPATH,PERL*,PEGASUS_*,TZ,HOME,USER,LANG,LC_ALL,POND_*"

// condorSubmitDag is "pondctl condor submit_dag [options] FILE.dag"
// (condor_submit_dag): it writes FILE.dag.condor.sub, a scheduler-universe
// job running "pondctl condor dagman run -dagman-job-id CLUSTER FILE.dag"
// in the DAG's directory, and submits it: the schedd runs the DAG manager
// on the submit host, and runs it again (it recovers) should it die.
func (m *meta) condorSubmitDag(ctx context.Context, args []string) int {
	const usage = "Usage: pondctl condor submit_dag [-pool ADDR] [-name SCHEDD] [-maxjobs N] [-maxidle N] [-maxpre N] [-maxpost N] [-f] [-no_submit] FILE.dag"
	fs := flag.NewFlagSet("submit_dag", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pool := fs.String("pool", "", "")
	name := fs.String("name", "", "")
	maxJobs := fs.Int("maxjobs", 0, "")
	maxIdle := fs.Int("maxidle", 0, "")
	maxPre := fs.Int("maxpre", 0, "")
	maxPost := fs.Int("maxpost", 0, "")
	force := fs.Bool("f", false, "")
	fs.BoolVar(force, "force", false, "")
	noSubmit := fs.Bool("no_submit", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(m.stdout, usage)
			return 0
		}
		fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: %v\n%s\n", err, usage)
		return 1
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: give one DAG file\n%s\n", usage)
		return 1
	}
	for _, v := range []int{*maxJobs, *maxIdle, *maxPre, *maxPost} {
		if v < 0 {
			fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: a throttle is negative\n")
			return 1
		}
	}
	dag := fs.Arg(0)
	if !filepath.IsAbs(dag) {
		dag = filepath.Join(m.dir, dag)
	}
	dag = filepath.Clean(dag)
	if _, err := dagman.ParseFile(dag); err != nil {
		fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: %v\n", err)
		return 1
	}
	subFile := dag + ".condor.sub"
	if _, err := os.Stat(subFile); err == nil && !*force {
		fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: %s already exists (the DAG was submitted before): give -f to overwrite it\n", subFile)
		return 1
	}
	if _, err := os.Stat(dag + ".lock"); err == nil {
		fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: %s exists: the DAG is being run, or its DAG manager died (run it again with pondctl condor dagman run to recover it, or remove the lock file)\n", dag+".lock")
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: finding pondctl: %v\n", err)
		return 1
	}
	text := dagSubmitDescription(exe, dag, dagJobOptions{pool: *pool, name: *name, maxJobs: *maxJobs, maxIdle: *maxIdle,
		maxPre: *maxPre, maxPost: *maxPost, noRescue: *force})
	if err := os.WriteFile(subFile, []byte(text), 0o644); err != nil {
		fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: %v\n", err)
		return 1
	}
	base := filepath.Base(dag)
	rel := func(suffix string) string { return base + suffix }
	line := strings.Repeat("-", 71)
	fmt.Fprintf(m.stdout, "\n%s\n", line)
	for _, f := range [][2]string{{"File for submitting this DAG to HTCondor", rel(".condor.sub")},
		{"Log of DAGMan debugging messages", rel(".dagman.out")}, {"Log of HTCondor library output", rel(".lib.out")},
		{"Log of HTCondor library error messages", rel(".lib.err")}, {"Log of the life of condor_dagman itself", rel(".dagman.log")}} {
		fmt.Fprintf(m.stdout, "%-51s: %s\n", f[0], f[1])
	}
	fmt.Fprintln(m.stdout)
	if *noSubmit {
		fmt.Fprintf(m.stdout, "-no_submit given, not submitting DAG to HTCondor.  You can do this with:\n\"pondctl condor submit %s\"\n%s\n", subFile, line)
		return 0
	}
	var common []string
	if *pool != "" {
		common = append(common, "-pool", *pool)
	}
	if *name != "" {
		common = append(common, "-name", *name)
	}
	env := append(slices.Clone(m.env), "PWD="+filepath.Dir(dag))
	if code := tools.SubmitInput(ctx, append(common, subFile), nil, m.stdout, m.stderr, env); code != 0 {
		return code
	}
	fmt.Fprintln(m.stdout, line)
	return 0
}

// quoteArgs is args as a submit file's new-syntax arguments value.
func quoteArgs(args []string) string {
	return `"` + strings.ReplaceAll(submit.JoinArgumentsV2(args), `"`, `""`) + `"`
}

// dagJobOptions are the DAG manager's options a DAG job passes on.
type dagJobOptions struct {
	pool, name string
	// batch is the batch name ("FILE.dag+CLUSTER" when empty).
	batch                             string
	maxJobs, maxIdle, maxPre, maxPost int
	noRescue                          bool
}

// dagSubmitDescription is FILE.dag.condor.sub: a scheduler-universe job
// running exe's "condor dagman run -dagman-job-id CLUSTER FILE.dag" in
// the DAG's directory, its nodes' batch name the job's own.
func dagSubmitDescription(exe, dag string, o dagJobOptions) string {
	base := filepath.Base(dag)
	batch := o.batch
	if batch == "" {
		batch = base + "+$(Cluster)"
	}
	dargs := []string{"condor", "dagman", "run", "-dagman-job-id", "$(Cluster)", "-batch-name", batch}
	if o.pool != "" {
		dargs = append(dargs, "-pool", o.pool)
	}
	if o.name != "" {
		dargs = append(dargs, "-name", o.name)
	}
	for _, t := range []struct {
		flag string
		v    int
	}{{"-maxjobs", o.maxJobs}, {"-maxidle", o.maxIdle}, {"-maxpre", o.maxPre}, {"-maxpost", o.maxPost}} {
		if t.v > 0 {
			dargs = append(dargs, t.flag, strconv.Itoa(t.v))
		}
	}
	if o.noRescue {
		dargs = append(dargs, "-norescue")
	}
	dargs = append(dargs, dag)
	return fmt.Sprintf(`# Filename: %s
# Generated by pondctl condor submit_dag %s
universe = scheduler
executable = %s
arguments = %s
getenv = %s
initialdir = %s
output = %s.lib.out
error = %s.lib.err
log = %s.dagman.log
batch_name = %s
+RemoveKillSig = "SIGUSR1"
+OtherJobRemoveRequirements = "DAGManJobId =?= $(Cluster)"
on_exit_remove = (ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >= 0 && ExitCode <= 2))
notification = never
queue
`, dag+".condor.sub", dag, exe, quoteArgs(dargs), dagGetenv, filepath.Dir(dag), base, base, base, batch)
}
