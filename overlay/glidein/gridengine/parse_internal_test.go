package gridengine

import (
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
)

// qstatXML is what Son of Grid Engine 8.1.9's qstat -xml -s prsz says of
// a running job, a held one, one in error and a zombie.
const qstatXML = `<?xml version='1.0'?>
<job_info  xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qstat/qstat.xsd">
  <queue_info>
    <job_list state="running">
      <JB_job_number>4</JB_job_number>
      <JAT_prio>0.50000</JAT_prio>
      <JB_name>pond-run</JB_name>
      <JB_owner>root</JB_owner>
      <state>r</state>
      <JAT_start_time>2026-11-29T11:47:59</JAT_start_time>
      <queue_name>pond.q@vm</queue_name>
      <slots>1</slots>
    </job_list>
  </queue_info>
  <job_info>
    <job_list state="pending">
      <JB_job_number>5</JB_job_number>
      <JB_name>pond-held</JB_name>
      <JB_owner>root</JB_owner>
      <state>hqw</state>
      <JB_submission_time>2026-11-29T11:48:00</JB_submission_time>
      <queue_name></queue_name>
      <slots>1</slots>
    </job_list>
    <job_list state="pending">
      <JB_job_number>6</JB_job_number>
      <JB_name>pond-error</JB_name>
      <JB_owner>root</JB_owner>
      <state>Eqw</state>
      <JB_submission_time>2026-11-29T11:48:01.250</JB_submission_time>
      <slots>1</slots>
    </job_list>
    <job_list state="zombie">
      <JB_job_number>1</JB_job_number>
      <JB_name>pond-zombie</JB_name>
      <JB_owner>root</JB_owner>
      <state>z</state>
      <JB_submission_time>2026-11-29T11:46:37</JB_submission_time>
      <slots>1</slots>
    </job_list>
    <job_list state="pending">
      <JB_job_number>7</JB_job_number>
      <JB_name>other</JB_name>
      <JB_owner>root</JB_owner>
      <state>qw</state>
    </job_list>
  </job_info>
</job_info>
`

// qacctOut is what qacct -j says of a job that ran, one that failed to
// start and one that exited with 3 (only the lines the site reads).
const qacctOut = `==============================================================
qname        pond.q              
hostname     vm                  
owner        root                
jobname      pond-done        
jobnumber    1                   
qsub_time    Sun Nov 29 11:46:37 2026
start_time   Sun Nov 29 11:46:43 2026
end_time     Sun Nov 29 11:46:46 2026
failed       0    
exit_status  0                   
==============================================================
hostname     vm                  
owner        root                
jobname      pond-nostart
jobnumber    2                   
qsub_time    Sun Nov 29 11:46:38 2026
start_time   -/-
end_time     -/-
failed       26  : opening input/output file
exit_status  0                   
==============================================================
owner        root                
jobname      pond-exit3
jobnumber    3                   
start_time   Sun Nov 29 11:46:43 2026
failed       0    
exit_status  3                   
`

// TestParse reads qstat -xml and qacct into glideins, each job's state
// and reason as pond reports them.
func TestParse(t *testing.T) {
	q, err := parseQstat([]byte(qstatXML))
	if err != nil {
		t.Fatal(err)
	}
	a, err := parseQacct([]byte(qacctOut))
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, _ := time.ParseInLocation("2006-01-02 15:04:05.000", s, time.Local)
		return v
	}
	want := []glidein.Glidein{
		{ID: "pond-run", SiteID: "4", State: glidein.Running, Host: "vm", Started: at("2026-11-29 11:47:59.000")},
		{ID: "pond-held", SiteID: "5", State: glidein.Queued, Reason: "on hold", Submitted: at("2026-11-29 11:48:00.000")},
		{ID: "pond-error", SiteID: "6", State: glidein.Failed, Reason: "Grid Engine state Eqw (job in error)", Submitted: at("2026-11-29 11:48:01.250")},
		{ID: "pond-zombie", SiteID: "1", State: glidein.Finishing, Reason: "ended; not yet in qacct", Submitted: at("2026-11-29 11:46:37.000")},
		{ID: "pond-done", SiteID: "1", State: glidein.Done, Host: "vm", Submitted: at("2026-11-29 11:46:37.000"),
			Started: at("2026-11-29 11:46:43.000"), Ended: at("2026-11-29 11:46:46.000")},
		{ID: "pond-nostart", SiteID: "2", State: glidein.Failed, Reason: "failed 26 opening input/output file, exit status 0", Host: "vm", Submitted: at("2026-11-29 11:46:38.000")},
		{ID: "pond-exit3", SiteID: "3", State: glidein.Failed, Reason: "exit status 3", Started: at("2026-11-29 11:46:43.000")},
	}
	var got []glidein.Glidein
	for _, j := range append(q, a...) {
		if g, ok := glideinOf(j, "pond-"); ok {
			got = append(got, g)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d glideins, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("glidein %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// TestParseJobID reads qsub -terse, and refuses what is not a job id.
func TestParseJobID(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"42\n", "42"}, {"42.1-10:1\n", "42"}, {"  7\nwarning: x\n", "7"},
		{"", ""}, {"Your job 42 (\"x\") has been submitted\n", ""}, {"0\n", ""}, {"-1\n", ""},
	} {
		got, err := parseJobID([]byte(tc.out))
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("parseJobID(%q) = %q, %v; want %q", tc.out, got, err, tc.want)
		}
	}
}

// TestParseQstatBad: what is not qstat's XML is an error, not an empty
// queue, which would make pond think its glideins gone.
func TestParseQstatBad(t *testing.T) {
	for _, in := range []string{"<job_info><job_list><JB_job_number>1", "error: commlib error", "", "<job_info><job_list></job_list></job_info>"} {
		if jobs, err := parseQstat([]byte(in)); err == nil {
			t.Errorf("parseQstat(%q) = %v, no error", in, jobs)
		}
	}
	if jobs, err := parseQstat([]byte("<?xml version='1.0'?>\n<job_info><queue_info></queue_info><job_info></job_info></job_info>")); err != nil || len(jobs) != 0 {
		t.Errorf("an empty queue: %v, %v", jobs, err)
	}
}

// TestOptions: qsub's options of a request and the site's settings.
func TestOptions(t *testing.T) {
	s, err := New(Config{WorkDir: "/w", Queue: "a.q,b.q@@gpu", Project: "phys", PE: "smp", Walltime: 2 * time.Hour, MemoryMB: 1000})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(s.options(glidein.Request{ID: "pond-x", CPUs: 3, Lifetime: 90*time.Minute + 500*time.Millisecond}, "/w/pond-x"), " ")
	want := "-N pond-x -o /w/pond-x/sge-$JOB_ID.out -j y -wd /w/pond-x -S /bin/sh -r n -pe smp 3 -l h_rt=5401 -l mem_free=334M -q a.q,b.q@@gpu -P phys"
	if got != want {
		t.Errorf("options:\n got %s\nwant %s", got, want)
	}
	for _, line := range []string{"-N x", "#$ -o /tmp", "-V", "-t 1-10", "-r y", "l gpu=1"} {
		if _, err := extraLine(line); err == nil {
			t.Errorf("extra %q was taken", line)
		}
	}
	if l, err := extraLine("#$ -l gpu=1"); err != nil || l != "#$ -l gpu=1" {
		t.Errorf("extra -l gpu=1: %q, %v", l, err)
	}
}

func FuzzParseQstat(f *testing.F) {
	f.Add([]byte(qstatXML))
	f.Add([]byte("<job_info><job_list state=\"zombie\"><JB_job_number>1</JB_job_number></job_list></job_info>"))
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := parseQstat(data)
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.id == "" {
				t.Fatalf("a job without an id: %+v", j)
			}
			glideinOf(j, "pond-")
		}
	})
}

func FuzzParseQacct(f *testing.F) {
	f.Add([]byte(qacctOut))
	f.Add([]byte("=====\njobnumber 1\nfailed\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, _ := parseQacct(data)
		for _, j := range jobs {
			if g, ok := glideinOf(j, "pond-"); ok && !g.State.Ended() {
				t.Fatalf("a job of qacct not ended: %+v", g)
			}
		}
	})
}

func FuzzParseJobID(f *testing.F) {
	f.Add([]byte("42\n"))
	f.Add([]byte("42.1-10:1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := parseJobID(data)
		if err == nil && (id == "" || strings.Trim(id, "0123456789") != "") {
			t.Fatalf("parseJobID(%q) = %q", data, id)
		}
	})
}
