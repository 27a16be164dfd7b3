package submit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/testenv"
)

// TestSubmitCompatibilityWithHTCondor is the submit-file harness of
// docs/compatibility.md: it writes a deterministic corpus of submit files
// (compatCorpus), expands each into job ads with Jobs and with HTCondor
// 24's condor_submit library (testdata/compat/jobads.py, through the
// Python bindings, which still make job ads without a schedd), and
// compares the ads attribute by attribute. It reports agreement per file
// and per class of attribute and fails when the share of files whose ads
// are identical drops below submitCompatBar.
//
// The bindings are those of HTCondor 24, installed beside any newer ones:
//
//	python3 -m pip install --target DIR 'htcondor>=24,<25'
//	POND_HTCONDOR24=DIR go test -run TestSubmitCompatibilityWithHTCondor ./condor/submit/
//
// SUBMIT_COMPAT_SHOW (default 5) is how many differing files are shown.
func TestSubmitCompatibilityWithHTCondor(t *testing.T) {
	py := requireHTCondor24(t)
	dir := t.TempDir()
	// HTCondor resolves symbolic links in the submit directory (Iwd).
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	corpus := compatCorpus()
	names := writeCompatCorpus(t, dir, corpus)

	want, environ := htcondorJobAds(t, py, dir, names)
	show := envIntDefault("SUBMIT_COMPAT_SHOW", 5)

	perClass := map[string]*tally{}
	perAttr := map[string]int{}
	identical := 0
	var shown []string
	for i, name := range names {
		got, gerr := pondJobAds(dir, name, environ)
		diffs := compareJobAds(got, gerr, want[i], perClass, perAttr)
		if len(diffs) == 0 {
			identical++
			continue
		}
		if len(shown) < show {
			shown = append(shown, fmt.Sprintf("%s:\n%s\n    differs:\n      %s", name,
				indent(corpus[i].text), strings.Join(diffs, "\n      ")))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d submit files: %d give identical job ads, %.2f%% (bar %.2f%%)\n",
		len(names), identical, pct(identical, len(names)), submitCompatBar)
	classes := make([]string, 0, len(perClass))
	for c := range perClass {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	fmt.Fprintf(&b, "  %-14s %9s %7s %8s\n", "class", "compared", "agree", "percent")
	for _, c := range classes {
		tl := perClass[c]
		fmt.Fprintf(&b, "  %-14s %9d %7d %7.2f%%\n", c, tl.n, tl.ok, pct(tl.ok, tl.n))
	}
	attrs := make([]string, 0, len(perAttr))
	for a := range perAttr {
		attrs = append(attrs, a)
	}
	sort.Strings(attrs)
	for _, a := range attrs {
		fmt.Fprintf(&b, "  attribute %s differs in %d job ads\n", a, perAttr[a])
	}
	for _, s := range shown {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	t.Log(b.String())
	if p := pct(identical, len(names)); p < submitCompatBar {
		t.Errorf("%.2f%% of submit files give HTCondor's job ads, below the bar of %.2f%%", p, submitCompatBar)
	}
}

// tally counts comparisons and agreements.
type tally struct{ n, ok int }

// submitCompatBar is the share of corpus files, in percent, whose job ads
// must be identical to HTCondor's. It only goes up.
const submitCompatBar = 99.0

func pct(a, b int) float64 {
	if b == 0 {
		return 100
	}
	return 100 * float64(a) / float64(b)
}

func envIntDefault(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err == nil {
		return n
	}
	return def
}

func indent(s string) string {
	return "      | " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n      | ")
}

// requireHTCondor24 returns the directory holding HTCondor 24's bindings
// (POND_HTCONDOR24), skips the test saying how to install them when the
// variable is not set, and fails it when the directory holds no HTCondor
// 24.
func requireHTCondor24(t *testing.T) string {
	t.Helper()
	const how = "python3 -m pip install --target DIR 'htcondor>=24,<25' and set POND_HTCONDOR24=DIR (.ci/run does)"
	dir := os.Getenv("POND_HTCONDOR24")
	if dir == "" {
		testenv.SkipOrFail(t, "POND_HTCONDOR24 does not name HTCondor 24's Python bindings, the oracle of submit files: "+how)
	}
	cmd := exec.Command("python3", "-W", "ignore", "-c", "import htcondor; print(htcondor.version())")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "$CondorVersion: 24.") {
		// Asked for and missing: fail, so that CI does not pass unchecked.
		t.Fatalf("POND_HTCONDOR24=%s holds no HTCondor 24 bindings (%v: %s): %s", dir, err, strings.TrimSpace(string(out)), how)
	}
	return dir
}

// Settings both sides share: HTCondor's reads them from its configuration,
// pond's from Options.
const (
	compatDomain = "pond.test"
	compatQDate  = 1000
	compatEnvSet = "set-value"
)

var compatEnv = []string{"POND_COMPAT_SET=" + compatEnvSet, "POND_COMPAT_OTHER=other value"}

// htcondorJobAds runs the oracle over the corpus in one python process.
func htcondorJobAds(t *testing.T, py, dir string, names []string) ([]oracleAds, map[string]string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "condor_config")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(
		"FILESYSTEM_DOMAIN = %s\nUID_DOMAIN = %s\nJOB_DEFAULT_REQUESTMEMORY = 128\nJOB_DEFAULT_REQUESTDISK = %s\n",
		compatDomain, compatDomain, Options{}.withDefaults().DefaultRequestDisk)), 0o644); err != nil {
		t.Fatal(err)
	}
	var reqs []map[string]any
	for _, n := range names {
		reqs = append(reqs, map[string]any{"file": n, "dir": dir, "qdate": compatQDate})
	}
	in, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "compat", "jobads.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", script)
	env := []string{"PYTHONPATH=" + py, "CONDOR_CONFIG=" + cfg, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	cmd.Env = append(env, compatEnv...)
	cmd.Stdin = strings.NewReader(string(in))
	var stderr strings.Builder
	cmd.Stderr = &stderr // what condor_submit says of the files it refuses
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle: %v\n%s", err, stderr.String())
	}
	var res struct {
		Environ map[string]string `json:"environ"`
		Files   []oracleAds       `json:"files"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("oracle output: %v", err)
	}
	recs := res.Files
	if len(recs) != len(names) {
		t.Fatalf("oracle answered %d of %d files", len(recs), len(names))
	}
	t.Logf("HTCondor 24 expanded %d files in %v", len(names), time.Since(start).Round(time.Millisecond))
	return recs, res.Environ
}

type oracleAds struct {
	Error string              `json:"error"`
	Ads   []map[string]string `json:"ads"`
}

// pondJobAds expands a corpus file as pond's submit does, with the
// settings the oracle's configuration gives HTCondor and the oracle's
// environment.
func pondJobAds(dir, name string, environ map[string]string) ([]Job, error) {
	src, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	f, err := Parse(name, src)
	if err != nil {
		return nil, err
	}
	var env []string
	for k, v := range environ {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	// HTCondor's bindings take the submitter from the process, whatever
	// the owner they are given (AcctGroupUser of a nice user shows it).
	owner := "nobody"
	if u, err := user.Current(); err == nil {
		owner = u.Username
	}
	return f.Jobs(context.Background(), Options{
		ClusterID: 1, Owner: owner, UIDDomain: compatDomain, FileSystemDomain: compatDomain,
		QDate: time.Unix(compatQDate, 0), SubmitDir: dir, Env: env,
		LookupEnv: func(k string) (string, bool) { v, ok := environ[k]; return v, ok },
	})
}

// normalisedAway are the attributes that must differ or that the two do
// not derive from the submit file: ids, times, the submitter, the tool
// and HTCondor's sizes of the executable (pond measures a job's image when
// it runs). docs/compatibility.md lists them.
var normalisedAway = setOf(
	"clusterid", "procid", "qdate", "enteredcurrentstatus", "owner", "user", "globaljobid", "submitfile",
	"condorversion", "condorplatform", "jobsubmitmethod", "executablesize", "imagesize", "diskusage",
)

// bookkeeping are the attributes only one side's job ads carry, at a
// value no submit command sets: counters and defaults one side's schedd
// (or pond's ad) keeps from the start. They are compared only when the
// submit file sets them.
var bookkeeping = map[string]string{
	// HTCondor only.
	"numckpts": "0", "transfererr": "false", "transferout": "false", "exitbysignal": "false",
	"numsystemholds": "0", "numjobcompletions": "0", "committedslottime": "0",
	"cumulativeremotesyscpu": "0.0", "cumulativeremoteusercpu": "0.0", "committedsuspensiontime": "0",
	"cumulativesuspensiontime": "0", "jobleaseduration": "2400",
	// pond only.
	"wantremotesyscalls": "false", "wantcheckpoint": "false", "periodichold": "false",
	"periodicrelease": "false", "periodicremove": "false", "numshadowstarts": "0", "numjobmatches": "0",
	"jobruncount": "0", "buffersize": "524288", "bufferblocksize": "32768", "coresize": "0",
	"streamout": "false", "streamerr": "false", "killsig": `"SIGTERM"`, "committedtime": "0",
	"completiondate": "0", "onexithold": "false", "onexitremove": "true",
}

// attrClass groups attributes for the report.
func attrClass(name string) string {
	switch n := strings.ToLower(name); {
	case n == "args" || n == "arguments":
		return "arguments"
	case n == "env" || n == "environment":
		return "environment"
	case n == "requirements" || n == "rank":
		return "requirements"
	case strings.HasPrefix(n, "request"):
		return "resources"
	case strings.HasPrefix(n, "transfer") || n == "shouldtransferfiles" || n == "whentotransferoutput" ||
		n == "in" || n == "out" || n == "err" || n == "userlog" || n == "iwd" || n == "cmd":
		return "files"
	case strings.HasPrefix(n, "onexit") || strings.HasPrefix(n, "periodic") || strings.Contains(n, "retries") ||
		n == "leavejobinqueue" || n == "successexitcode" || n == "jobstatus" || strings.HasPrefix(n, "holdreason"):
		return "policy"
	case n == "concurrencylimits" || strings.HasPrefix(n, "acct") || n == "accountinggroup" || n == "jobprio" ||
		n == "niceuser" || n == "jobbatchname":
		return "accounting"
	}
	return "other"
}

// compareJobAds compares pond's job ads of one file with HTCondor's and
// returns the differences, counting comparisons per attribute class.
func compareJobAds(got []Job, gerr error, want oracleAds, perClass map[string]*tally, perAttr map[string]int) []string {
	count := func(class string, ok bool) {
		tl := perClass[class]
		if tl == nil {
			tl = &tally{}
			perClass[class] = tl
		}
		tl.n++
		if ok {
			tl.ok++
		}
	}
	switch {
	case want.Error != "" && gerr != nil:
		count("refusal", true)
		return nil
	case want.Error != "":
		count("refusal", false)
		return []string{"HTCondor refuses it: " + want.Error + "; pond accepts it"}
	case gerr != nil:
		count("refusal", false)
		return []string{"pond refuses it: " + gerr.Error()}
	case len(got) != len(want.Ads):
		count("jobs", false)
		return []string{fmt.Sprintf("pond makes %d jobs, HTCondor %d", len(got), len(want.Ads))}
	}
	count("jobs", true)
	var diffs []string
	for i := range got {
		p, h := lowerKeys(got[i]), lowerKeys(want.Ads[i])
		names := map[string]string{}
		for k := range got[i] {
			names[strings.ToLower(k)] = k
		}
		for k := range want.Ads[i] {
			names[strings.ToLower(k)] = k
		}
		keys := make([]string, 0, len(names))
		for k := range names {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, skip := normalisedAway[k]; skip {
				continue
			}
			pv, pok := p[k]
			hv, hok := h[k]
			if def, ok := bookkeeping[k]; ok && pok != hok {
				if v := pv + hv; canonExpr(v) == canonExpr(def) {
					continue
				}
			}
			same := pok == hok && canonExpr(pv) == canonExpr(hv)
			count(attrClass(k), same)
			if same {
				continue
			}
			perAttr[names[k]]++
			if len(diffs) < 8 {
				diffs = append(diffs, fmt.Sprintf("job %d %s: pond %s, HTCondor %s", i, names[k], show(pv, pok), show(hv, hok)))
			}
		}
	}
	return diffs
}

func lowerKeys(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}

func show(v string, ok bool) string {
	if !ok {
		return "(unset)"
	}
	return v
}

// canonExpr prints an expression as pond's ClassAd library does, so that
// spacing and layout do not count as differences.
func canonExpr(s string) string {
	e, err := classad.ParseExpr(s)
	if err != nil {
		return strings.TrimSpace(s)
	}
	return e.String()
}
