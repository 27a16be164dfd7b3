package acceptance

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// escapePool is one agent with two slots, so that two jobs run at once.
// Its jobs share the host's /tmp (MOUNT_UNDER_SCRATCH is empty), where the
// probes' files are: what keeps them out is the slot users' file modes
// alone (TestJobsShareNoTmp checks the private /tmp).
const escapePool = `
pool "escape" {
  nodes  = 1
  slots  = 2
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5", MOUNT_UNDER_SCRATCH = "" }
}

output "cm" {
  value = pool.escape.central_manager
}
`

// TestJobsCannotEscape submits, as a local user who is not root, jobs that
// try to leave their sandbox on a pool whose agent runs as root: an output
// link to /etc/shadow, an output written to an absolute path of root's, a
// root-only input file, an initial directory the user cannot read, a job
// that reads every file of the agent's data directory (the job queue, the
// node's configuration, the pool secret), and two jobs in different slots
// of which one reads the other's scratch directory. Each is held with a
// reason that says why, or runs and finds nothing, and nothing leaks.
func TestJobsCannotEscape(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "the escape probes need root: they submit as a local user who is not the agent's")
	if _, err := exec.LookPath("useradd"); err != nil {
		testenv.SkipOrFail(t, "the escape probes need useradd to make their local user")
	}
	name := fmt.Sprintf("pondesc%d", os.Getpid()%100000)
	if out, err := exec.Command("useradd", "-M", "-s", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		testenv.SkipOrFailf(t, "useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	acct, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(acct.Uid)
	gid, _ := strconv.Atoi(acct.Gid)

	// The user's and root's files, in a tree every user may search.
	base, err := os.MkdirTemp("", "pond-escape")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	home := filepath.Join(base, "home")       // the user's: the jobs' Iwd
	shared := filepath.Join(base, "shared")   // anyone's, as /tmp
	rootDir := filepath.Join(base, "root")    // root's, readable
	private := filepath.Join(base, "private") // root's, 0700
	secret := filepath.Join(rootDir, "secret")
	secretText := fmt.Sprintf("root-only-%d", time.Now().UnixNano())
	mustAll(t,
		os.Chmod(base, 0o755),
		os.Mkdir(home, 0o755), os.Chown(home, uid, gid),
		os.Mkdir(shared, 0o777), os.Chmod(shared, 0o777|fs.ModeSticky),
		os.Mkdir(rootDir, 0o755), os.WriteFile(secret, []byte(secretText), 0o600),
		os.Mkdir(private, 0o700), os.WriteFile(filepath.Join(private, "in.txt"), []byte(secretText), 0o644),
	)
	writeAs := func(path, text string, mode os.FileMode) {
		mustAll(t, os.WriteFile(path, []byte(text), mode), os.Chmod(path, mode), os.Chown(path, uid, gid))
	}

	w := newWorkdir(t, "")
	// The working directory may be searched by anyone, so that only the
	// agent's own file modes stand between a job and its files.
	mustAll(t, os.Chmod(filepath.Dir(w.dir), 0o755), os.Chmod(w.dir, 0o755))
	w.write("main.pond.hcl", escapePool)
	// The apply is started as from a shell that holds root's secret
	// open on descriptor 9 (not close-on-exec), as "exec 9<secret" does.
	held, err := os.Open(secret)
	if err != nil {
		t.Fatal(err)
	}
	w.inherited = make([]*os.File, 7) // descriptors 3 to 9
	w.inherited[6] = held
	w.expect(0, "apply", "-auto-approve")
	w.inherited = nil
	held.Close()
	cm := w.output("cm")

	// Every file the agent keeps, for a job to try to read.
	var agentFiles []string
	mustAll(t, filepath.WalkDir(filepath.Join(w.dir, ".pond"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			agentFiles = append(agentFiles, p)
		}
		return err
	}))
	if !containsSuffix(agentFiles, "job_queue.db") {
		t.Fatalf("no job queue among the agent's files %v", agentFiles)
	}
	writeAs(filepath.Join(home, "targets"), strings.Join(agentFiles, "\n")+"\n", 0o644)
	writeAs(filepath.Join(home, "reader.sh"), "#!/bin/sh\nwhile read -r f; do cat \"$f\"; done < targets\nexit 0\n", 0o755)
	// Every descriptor a job holds, and what it reads through 3 to 9.
	writeAs(filepath.Join(home, "fds.sh"), "#!/bin/sh\nls /proc/self/fd | tr '\\n' ' '\necho\nfor n in 3 4 5 6 7 8 9; do eval \"cat <&$n\" 2>/dev/null; done\nexit 0\n", 0o755)
	writeAs(filepath.Join(home, "a.sh"), fmt.Sprintf(`#!/bin/sh
umask 022
id -u
echo scratch-secret > secret.txt
echo "$_CONDOR_SCRATCH_DIR" > %[1]s/a.dir
i=0; while [ ! -e %[1]s/b.done ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done
`, shared), 0o755)
	writeAs(filepath.Join(home, "b.sh"), fmt.Sprintf(`#!/bin/sh
id -u
i=0; while [ ! -e %[1]s/a.dir ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done
d=$(cat %[1]s/a.dir)
cat "$d/secret.txt"
ls "$d"
touch %[1]s/b.done
exit 0
`, shared), 0o755)

	// The jobs are the user's: submitted with a token whose subject is
	// the user's name.
	tok := w.expect(0, "token", "create", "-subject", name, "-scope", "WRITE", "-lifetime", "1h")
	w.env = append(w.env, "POND_TOKEN="+strings.TrimSpace(tok.stdout))
	probes := []struct {
		name, sub string
		hold      string // in the hold reason; "" for a job that runs to its end
	}{
		{"an output link to /etc/shadow",
			"executable = /bin/sh\narguments = \"-c 'ln -s /etc/shadow leak'\"\ntransfer_executable = false\ntransfer_output_files = leak\n",
			"transfer of output file leak failed: leak is a symbolic link that leads out of"},
		{"output to an absolute path of root's",
			"executable = /bin/echo\narguments = pwned\ntransfer_executable = false\noutput = " + filepath.Join(rootDir, "out") + "\n",
			"writing Out as " + name + ": open " + filepath.Join(rootDir, "out") + ": permission denied"},
		{"a root-only input file",
			"executable = /bin/true\ntransfer_executable = false\ntransfer_input_files = " + secret + "\n",
			"transfer input file " + secret + " as " + name + ": open " + secret + ": permission denied"},
		{"an initial directory the owner cannot read",
			"executable = /bin/true\ntransfer_executable = false\ntransfer_input_files = in.txt\ninitialdir = " + private + "\n",
			"opening the job's initial directory as " + name},
		{"reading the agent's files",
			"executable = " + filepath.Join(home, "reader.sh") + "\ntransfer_input_files = targets\noutput = reader.out\nerror = reader.err\n", ""},
		{"the files the agent was started with",
			"executable = " + filepath.Join(home, "fds.sh") + "\noutput = fds.out\nerror = fds.err\n", ""},
		{"the files the agent was started with, in the local universe",
			"universe = local\nexecutable = " + filepath.Join(home, "fds.sh") + "\noutput = fdslocal.out\nerror = fdslocal.err\n", ""},
		{"a job in one slot",
			"executable = " + filepath.Join(home, "a.sh") + "\noutput = a.out\nerror = a.err\nrequest_cpus = 1\n", ""},
		{"a job in another slot reading the first's scratch directory",
			"executable = " + filepath.Join(home, "b.sh") + "\noutput = b.out\nerror = b.err\nrequest_cpus = 1\n", ""},
	}
	clusterRE := regexp.MustCompile(`submitted to cluster (\d+)\.`)
	cluster := map[string]string{}
	for i, p := range probes {
		sub := "initialdir = " + home + "\nrequest_memory = 32\n" + p.sub + "queue\n"
		file := fmt.Sprintf("probe%d.sub", i)
		w.write(file, sub)
		r := w.expect(0, "condor", "submit", "-pool", cm, file)
		m := clusterRE.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("%s: submit said %s", p.name, r)
		}
		cluster[p.name] = m[1]
	}

	// Wait until every probe is held or has left the queue.
	state := map[string]string{} // cluster -> "status reason"
	eventually(t, 2*time.Minute, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId", "JobStatus", "HoldReason")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		clear(state)
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if c, rest, ok := strings.Cut(line, " "); ok {
				state[c] = rest
			}
		}
		for _, p := range probes {
			if st, queued := state[cluster[p.name]]; queued && !strings.HasPrefix(st, "5 ") {
				return fmt.Errorf("%s (cluster %s) is neither held nor done: %q", p.name, cluster[p.name], st)
			}
		}
		return nil
	})
	for _, p := range probes {
		st, queued := state[cluster[p.name]]
		switch {
		case p.hold == "" && queued:
			t.Errorf("%s: held with %q, want it to run to its end", p.name, st)
		case p.hold != "" && !queued:
			t.Errorf("%s: ran to its end, want it held with a reason with %q", p.name, p.hold)
		case p.hold != "" && !strings.Contains(st, p.hold):
			t.Errorf("%s: held with %q, want a reason with %q", p.name, st, p.hold)
		}
	}

	// Nothing was written where the user may not write, and nothing the
	// user may not read reached the user's directory.
	if _, err := os.Lstat(filepath.Join(rootDir, "out")); err == nil {
		t.Error("a job's output was written in root's directory")
	}
	shadow, _ := os.ReadFile("/etc/shadow")
	mustAll(t, filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var st os.FileInfo
		if st, err = os.Lstat(p); err == nil && st.Name() == "leak" {
			t.Errorf("the link's target was transferred back as %s", p)
		}
		switch {
		case bytes.Contains(b, []byte(secretText)):
			t.Errorf("%s holds the root-only secret", p)
		case len(shadow) > 0 && bytes.Contains(b, shadow[:min(len(shadow), 64)]):
			t.Errorf("%s holds /etc/shadow", p)
		}
		return nil
	}))

	// The reader found none of the agent's files.
	out := readFile(t, filepath.Join(home, "reader.out"))
	if strings.Contains(out, "SQLite format 3") {
		t.Error("a job read the job queue")
	}
	for _, f := range agentFiles {
		b, err := os.ReadFile(f)
		if err == nil && len(b) >= 16 && strings.Contains(out, string(b[:16])) {
			t.Errorf("a job read the agent's %s", f)
		}
	}
	if errs := readFile(t, filepath.Join(home, "reader.err")); strings.Count(errs, "Permission denied") != len(agentFiles) {
		t.Errorf("the reader was not refused every one of the agent's %d files:\n%s", len(agentFiles), errs)
	}

	// The jobs held their standard streams and nothing else (ls's own
	// listing of /proc/self/fd is its descriptor 3); the walk above
	// found no secret read through one.
	for _, f := range []string{"fds.out", "fdslocal.out"} {
		fds, _, _ := strings.Cut(readFile(t, filepath.Join(home, f)), "\n")
		if got := strings.Fields(fds); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
			t.Errorf("%s: the job held descriptors %v, want its standard streams and ls's own", f, got)
		}
	}

	// The two jobs ran at once, as different users neither root nor the
	// owner, and the second could not read the first's scratch directory.
	aUID := strings.TrimSpace(readFile(t, filepath.Join(home, "a.out")))
	bOut := readFile(t, filepath.Join(home, "b.out"))
	bUID, rest, _ := strings.Cut(bOut, "\n")
	if aUID == bUID || aUID == "0" || bUID == "0" || aUID == acct.Uid || bUID == acct.Uid {
		t.Errorf("the jobs ran as uids %s and %s (owner %s): want two slot users", aUID, bUID, acct.Uid)
	}
	if _, err := os.Stat(filepath.Join(shared, "b.done")); err != nil {
		t.Error("the second job did not run while the first ran")
	}
	if strings.Contains(rest, "scratch-secret") || strings.Contains(rest, "secret.txt") {
		t.Errorf("a job read another slot's scratch directory: %q", rest)
	}
	if bErr := readFile(t, filepath.Join(home, "b.err")); strings.Count(bErr, "Permission denied") != 2 {
		t.Errorf("the second job was not refused the first's scratch directory: %q", bErr)
	}
	w.expect(0, "destroy", "-auto-approve")
}

func mustAll(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func containsSuffix(list []string, suffix string) bool {
	for _, s := range list {
		if strings.HasSuffix(s, suffix) {
			return true
		}
	}
	return false
}
