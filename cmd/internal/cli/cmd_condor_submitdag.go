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
	o, code, done := m.submitDagFlags(args)
	if done {
		return code
	}
	subFile, err := m.writeDagSubmitFile(o)
	if err != nil {
		fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: %v\n", err)
		return 1
	}
	line := strings.Repeat("-", 71)
	m.printDagFiles(o.dag, line)
	if o.noSubmit {
		fmt.Fprintf(m.stdout, "-no_submit given, not submitting DAG to HTCondor.  You can do this with:\n\"pondctl condor submit %s\"\n%s\n", subFile, line)
		return 0
	}
	var common []string
	if o.pool != "" {
		common = append(common, "-pool", o.pool)
	}
	if o.name != "" {
		common = append(common, "-name", o.name)
	}
	env := append(slices.Clone(m.env), "PWD="+filepath.Dir(o.dag))
	if code := tools.SubmitInput(ctx, append(common, subFile), nil, m.stdout, m.stderr, env); code != 0 {
		return code
	}
	fmt.Fprintln(m.stdout, line)
	return 0
}

// submitDagOptions are submit_dag's command line: the DAG file (absolute)
// and the DAG manager's options.
type submitDagOptions struct {
	dagJobOptions
	dag             string
	force, noSubmit bool
}

// submitDagFlags parses submit_dag's command line; done says the command
// is over (help, or a mistake already reported), with code its exit code.
func (m *meta) submitDagFlags(args []string) (o submitDagOptions, code int, done bool) {
	const usage = "Usage: pondctl condor submit_dag [-pool ADDR] [-name SCHEDD] [-maxjobs N] [-maxidle N] [-maxpre N] [-maxpost N] [-f] [-no_submit] FILE.dag"
	fs := flag.NewFlagSet("submit_dag", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.pool, "pool", "", "")
	fs.StringVar(&o.name, "name", "", "")
	fs.IntVar(&o.maxJobs, "maxjobs", 0, "")
	fs.IntVar(&o.maxIdle, "maxidle", 0, "")
	fs.IntVar(&o.maxPre, "maxpre", 0, "")
	fs.IntVar(&o.maxPost, "maxpost", 0, "")
	fs.BoolVar(&o.force, "f", false, "")
	fs.BoolVar(&o.force, "force", false, "")
	fs.BoolVar(&o.noSubmit, "no_submit", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(m.stdout, usage)
			return o, 0, true
		}
		fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: %v\n%s\n", err, usage)
		return o, 1, true
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: give one DAG file\n%s\n", usage)
		return o, 1, true
	}
	for _, v := range []int{o.maxJobs, o.maxIdle, o.maxPre, o.maxPost} {
		if v < 0 {
			fmt.Fprintf(m.stderr, "condor_submit_dag: ERROR: a throttle is negative\n")
			return o, 1, true
		}
	}
	o.noRescue = o.force
	o.dag = fs.Arg(0)
	if !filepath.IsAbs(o.dag) {
		o.dag = filepath.Join(m.dir, o.dag)
	}
	o.dag = filepath.Clean(o.dag)
	return o, 0, false
}

// writeDagSubmitFile checks the DAG (it parses, it was not submitted
// before unless forced or a rescue DAG of it is there to run, it is not
// running) and writes its submit file, whose path it returns. As
// condor_submit_dag: a DAG with a rescue DAG is run from its newest
// rescue DAG (the nodes it lists done are not run again); with -f, its
// rescue DAGs are renamed (FILE.dag.rescueNNN.old) and the DAG runs from
// its start.
func (m *meta) writeDagSubmitFile(o submitDagOptions) (string, error) {
	dag := o.dag
	if _, err := dagman.ParseFile(dag); err != nil {
		return "", err
	}
	if _, err := os.Stat(dag + ".lock"); err == nil {
		return "", fmt.Errorf("%s exists: the DAG is being run, or its DAG manager died (run it again with pondctl condor dagman run to recover it, or remove the lock file)", dag+".lock")
	}
	rescue := dagman.NewestRescue(dag)
	subFile := dag + ".condor.sub"
	if _, err := os.Stat(subFile); err == nil && !o.force && rescue == 0 {
		return "", fmt.Errorf("%s already exists (the DAG was submitted before): give -f to overwrite it", subFile)
	}
	switch {
	case rescue > 0 && o.force:
		olds, err := filepath.Glob(dag + ".rescue[0-9][0-9][0-9]")
		if err != nil {
			return "", err
		}
		for _, r := range olds {
			if err := os.Rename(r, r+".old"); err != nil {
				return "", fmt.Errorf("renaming the rescue DAG %s: %w", r, err)
			}
		}
		fmt.Fprintf(m.stdout, "Renamed %d rescue DAG(s) to *.old: running the DAG from its start\n", len(olds))
	case rescue > 0:
		fmt.Fprintf(m.stdout, "Running rescue DAG %d\n", rescue)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding pondctl: %w", err)
	}
	if err := os.WriteFile(subFile, []byte(dagSubmitDescription(exe, dag, o.dagJobOptions)), 0o644); err != nil {
		return "", err
	}
	return subFile, nil
}

// printDagFiles prints condor_submit_dag's list of the DAG's files.
func (m *meta) printDagFiles(dag, line string) {
	rel := func(suffix string) string { return filepath.Base(dag) + suffix }
	fmt.Fprintf(m.stdout, "\n%s\n", line)
	for _, f := range [][2]string{{"File for submitting this DAG to HTCondor", rel(".condor.sub")},
		{"Log of DAGMan debugging messages", rel(".dagman.out")}, {"Log of HTCondor library output", rel(".lib.out")},
		{"Log of HTCondor library error messages", rel(".lib.err")}, {"Log of the life of condor_dagman itself", rel(".dagman.log")}} {
		fmt.Fprintf(m.stdout, "%-51s: %s\n", f[0], f[1])
	}
	fmt.Fprintln(m.stdout)
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
