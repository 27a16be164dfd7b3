package joblog

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// TestJobLogCompatibilityWithHTCondor is the job-log harness of
// docs/compatibility.md: it writes a seeded, deterministic log of
// generated events of every type pond writes (edge values, odd text,
// large ids and numbers), has HTCondor 25's reader (htcondor2.JobEventLog)
// read it, and compares each event's type, job id, time and fields with
// what was written. It reports agreement per event type and fails below
// jobLogCompatBar.
//
//	JOBLOG_COMPAT_N     number of events (default 5000)
//	JOBLOG_COMPAT_SEED  seed of the generator (default 1)
func TestJobLogCompatibilityWithHTCondor(t *testing.T) {
	if out, err := exec.Command("python3", "-c", "import htcondor2").CombinedOutput(); err != nil {
		testenv.SkipOrFailf(t, "HTCondor's Python bindings are not installed (python3 -m pip install htcondor): %s", strings.TrimSpace(string(out)))
	}
	n, seed := envN("JOBLOG_COMPAT_N", 5000), envN("JOBLOG_COMPAT_SEED", 1)
	events := generateEvents(uint64(seed), n)
	path := filepath.Join(t.TempDir(), "job.log")
	if err := NewWriter(path, WriterOptions{Location: time.UTC}).Write(events...); err != nil {
		t.Fatal(err)
	}
	script := `
import json, sys, htcondor2
out = []
for e in htcondor2.JobEventLog(sys.argv[1]).events(0):
    d = {k: e[k] for k in e.keys()}
    d["_type"], d["_cluster"], d["_proc"], d["_timestamp"] = int(e.type), e.cluster, e.proc, e.timestamp
    out.append(d)
print(json.dumps(out, default=str))
`
	cmd := exec.Command("python3", "-c", script, path)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("HTCondor's reader: %v\n%.2000s", err, stderr.String())
	}
	var got []map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("HTCondor's reader printed %.200s: %v", out, err)
	}
	if len(got) != len(events) {
		t.Fatalf("HTCondor's reader read %d events of %d", len(got), len(events))
	}
	type tally struct{ n, ok int }
	per := map[string]*tally{}
	var shown []string
	agree := 0
	for i, ev := range events {
		diffs := compareEvent(ev, got[i])
		tl := per[ev.Type.String()]
		if tl == nil {
			tl = &tally{}
			per[ev.Type.String()] = tl
		}
		tl.n++
		if len(diffs) == 0 {
			tl.ok++
			agree++
		} else if len(shown) < 10 {
			shown = append(shown, fmt.Sprintf("event %d (%s %s): %s", i, ev.Type, ev.ID(), strings.Join(diffs, "; ")))
		}
	}
	types := make([]string, 0, len(per))
	for k := range per {
		types = append(types, k)
	}
	sort.Strings(types)
	var b strings.Builder
	fmt.Fprintf(&b, "%d events (seed %d): HTCondor reads %d as written, %.2f%% (bar %.2f%%)\n", len(events), seed, agree,
		100*float64(agree)/float64(len(events)), jobLogCompatBar)
	for _, k := range types {
		fmt.Fprintf(&b, "  %-22s %6d %6d\n", k, per[k].n, per[k].ok)
	}
	for _, s := range shown {
		fmt.Fprintf(&b, "  differs: %s\n", s)
	}
	t.Log(b.String())
	if p := 100 * float64(agree) / float64(len(events)); p < jobLogCompatBar {
		t.Errorf("HTCondor reads %.2f%% of the events as written, below the bar of %.2f%%", p, jobLogCompatBar)
	}
}

// jobLogCompatBar is the share of generated events, in percent, HTCondor
// must read as they were written. It only goes up.
const jobLogCompatBar = 100.0

func envN(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// generateEvents returns n events of every type pond writes, from seed.
func generateEvents(seed uint64, n int) []Event {
	r := rand.New(rand.NewPCG(seed, 17))
	texts := []string{"", "via condor_rm (by user alice)", "via condor_hold (by user bob)", "Error from slot1@node1: it broke",
		"a  double  space", "tab\there", "line\nbreak", "ünïcödé text", "100% done; $(x) \"quoted\"", "trailing space ",
		strings.Repeat("long ", 60), "Code 5 Subcode 6", "..."}
	text := func() string { return texts[r.IntN(len(texts))] }
	usage := func() Usage {
		return Usage{User: time.Duration(r.Int64N(400000)) * time.Second, Sys: time.Duration(r.Int64N(90000)) * time.Second}
	}
	big := func() int64 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return r.Int64N(1000)
		case 2:
			return r.Int64N(1 << 31)
		}
		return r.Int64N(1 << 50)
	}
	types := []EventType{Submit, Execute, ExecutableError, Evicted, Terminated, ImageSize, ShadowException, Generic,
		Aborted, Suspended, Unsuspended, Held, Released, FileTransfer, JobDisconnected, JobReconnected, JobReconnectFailed}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out []Event
	for i := 0; i < n; i++ {
		ev := Event{Type: types[r.IntN(len(types))], Cluster: r.IntN(100000), Proc: r.IntN(2000),
			Time: base.Add(time.Duration(r.Int64N(3e7)) * time.Second)}
		switch ev.Type {
		case Submit:
			ev.Host = fmt.Sprintf("<10.0.%d.%d:9618?addrs=10.0.%d.%d-9618&noUDP&sock=schedd_%d>", r.IntN(256), r.IntN(256), r.IntN(256), r.IntN(256), r.IntN(9999))
			if r.IntN(2) == 0 {
				ev.Notes = strings.TrimSpace(strings.ReplaceAll(text(), "\n", " "))
			}
		case Execute:
			ev.Host = fmt.Sprintf("<10.1.0.%d:%d>", r.IntN(256), 1024+r.IntN(60000))
			if r.IntN(3) > 0 {
				ev.SlotName = fmt.Sprintf("slot1_%d@node%d.example.org", r.IntN(64), r.IntN(1000))
			}
		case ExecutableError:
			ev.ErrorKind = r.IntN(2)
		case Evicted:
			ev.Checkpointed = r.IntN(2) == 0
			ev.RunRemote, ev.RunLocal = usage(), usage()
			ev.SentBytes, ev.ReceivedBytes = big(), big()
			if r.IntN(3) == 0 {
				// A job its OnExitRemove kept in the queue.
				ev.Checkpointed, ev.TerminatedAndRequeued = false, true
				ev.TerminatedNormally = r.IntN(2) == 0
				if ev.TerminatedNormally {
					ev.ReturnValue = r.IntN(256)
				} else {
					ev.Signal = 1 + r.IntN(31)
				}
				ev.Message = "The OnExitRemove expression 'ExitCode == 0' evaluated to False"
			}
		case Terminated:
			ev.TerminatedNormally = r.IntN(3) > 0
			if ev.TerminatedNormally {
				ev.ReturnValue = r.IntN(256)
			} else {
				ev.Signal = 1 + r.IntN(31)
				if r.IntN(2) == 0 {
					ev.CoreFile = fmt.Sprintf("/scratch/core.%d", r.IntN(100000))
				}
			}
			ev.RunRemote, ev.RunLocal, ev.TotalRemote, ev.TotalLocal = usage(), usage(), usage(), usage()
			ev.SentBytes, ev.ReceivedBytes, ev.TotalSentBytes, ev.TotalReceivedBytes = big(), big(), big(), big()
		case ImageSize:
			ev.ImageSizeKB, ev.MemoryUsageMB, ev.ResidentSetSizeKB = 1+big(), big(), big()
		case ShadowException, Aborted, Released:
			ev.Message = text()
		case Generic:
			// A generic event's text is the rest of its header line, where
			// HTCondor's reader cannot take "..." (ULOG_RD_ERROR): see
			// docs/compatibility.md.
			if ev.Message = text(); ev.Message == "..." {
				ev.Message = ""
			}
		case Suspended:
			ev.NumPIDs = r.IntN(1000)
		case Held:
			ev.Message = text()
			ev.HoldCode, ev.HoldSubCode = r.IntN(50), r.IntN(300)
		case JobDisconnected, JobReconnected, JobReconnectFailed:
			ev.SlotName = fmt.Sprintf("slot1_%d@node%d.example.org", r.IntN(64), r.IntN(1000))
			if ev.Type != JobReconnectFailed {
				ev.Host = fmt.Sprintf("<10.1.0.%d:%d>", r.IntN(256), 1024+r.IntN(60000))
			}
			if ev.Type == JobReconnected {
				ev.StarterHost = fmt.Sprintf("<10.1.0.%d:%d>", r.IntN(256), 1024+r.IntN(60000))
			} else {
				ev.Message = []string{"Socket between submit and execute hosts closed unexpectedly",
					"The execute node node7 failed or left the sea",
					fmt.Sprintf("Job disconnected too long: JobLeaseDuration (%d seconds) expired", r.IntN(5000))}[r.IntN(3)]
			}
		case FileTransfer:
			ev.TransferKind = []int{TransferInputStarted, TransferInputFinished, TransferOutputStarted, TransferOutputFinished}[r.IntN(4)]
			if r.IntN(2) == 0 {
				ev.Host = fmt.Sprintf("<10.1.0.%d:%d>", r.IntN(256), 1024+r.IntN(60000))
			}
			if r.IntN(2) == 0 {
				ev.QueueingDelay = r.Int64N(10000)
			}
		}
		out = append(out, ev)
	}
	return out
}

func gvFloat(v any) float64 { f, _ := v.(float64); return f }

// compareEvent compares what HTCondor's reader read of ev with ev.
func compareEvent(ev Event, g map[string]any) []string {
	var diffs []string
	num := func(v any) int64 { f, _ := v.(float64); return int64(f) }
	if num(g["_type"]) != int64(ev.Type) || num(g["_cluster"]) != int64(ev.Cluster) || num(g["_proc"]) != int64(ev.Proc) {
		diffs = append(diffs, fmt.Sprintf("read as type %v job %v.%v", g["_type"], g["_cluster"], g["_proc"]))
	}
	if num(g["_timestamp"]) != ev.Time.Unix() {
		diffs = append(diffs, fmt.Sprintf("time %v, wrote %d", g["_timestamp"], ev.Time.Unix()))
	}
	// The log holds one line per text: line breaks become spaces.
	line := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ") }
	check := func(key string, want any) {
		gv, ok := g[key]
		switch w := want.(type) {
		case float32:
			if !ok || float32(num(gv)) != w && float32(gvFloat(gv)) != w {
				diffs = append(diffs, fmt.Sprintf("%s = %v, wrote %v", key, gv, w))
			}
		case int64:
			if !ok || num(gv) != w {
				diffs = append(diffs, fmt.Sprintf("%s = %v, wrote %d", key, gv, w))
			}
		case string:
			if !ok && w == "" {
				return
			}
			want := strings.TrimSpace(line(w))
			if key == "Info" { // a generic event's text keeps its trailing spaces
				want = line(w)
			}
			if gs, _ := gv.(string); gs != want {
				diffs = append(diffs, fmt.Sprintf("%s = %q, wrote %q", key, gv, w))
			}
		default:
			if !ok || fmt.Sprint(gv) != fmt.Sprint(w) {
				diffs = append(diffs, fmt.Sprintf("%s = %v, wrote %v", key, gv, w))
			}
		}
	}
	switch ev.Type {
	case Submit:
		check("SubmitHost", ev.Host)
		check("LogNotes", ev.Notes)
	case Execute:
		check("ExecuteHost", ev.Host)
		check("SlotName", ev.SlotName)
	case JobDisconnected:
		check("DisconnectReason", ev.Message)
		check("StartdName", ev.SlotName)
		check("StartdAddr", ev.Host)
	case JobReconnected:
		check("StartdName", ev.SlotName)
		check("StartdAddr", ev.Host)
		check("StarterAddr", ev.StarterHost)
	case JobReconnectFailed:
		check("Reason", ev.Message)
		check("StartdName", ev.SlotName)
	case ExecutableError:
		check("ExecuteErrorType", int64(ev.ErrorKind))
	case Evicted:
		check("Checkpointed", ev.Checkpointed)
		check("TerminatedAndRequeued", ev.TerminatedAndRequeued)
		if ev.TerminatedAndRequeued {
			check("TerminatedNormally", ev.TerminatedNormally)
			if ev.TerminatedNormally {
				check("ReturnValue", int64(ev.ReturnValue))
			} else {
				check("TerminatedBySignal", int64(ev.Signal))
			}
		}
		check("SentBytes", ev.SentBytes)
		check("ReceivedBytes", ev.ReceivedBytes)
		check("RunRemoteUsage", formatUsage(ev.RunRemote))
		check("RunLocalUsage", formatUsage(ev.RunLocal))
	case Terminated:
		check("TerminatedNormally", ev.TerminatedNormally)
		if ev.TerminatedNormally {
			check("ReturnValue", int64(ev.ReturnValue))
		} else {
			check("TerminatedBySignal", int64(ev.Signal))
			check("CoreFile", ev.CoreFile)
		}
		check("RunRemoteUsage", formatUsage(ev.RunRemote))
		check("RunLocalUsage", formatUsage(ev.RunLocal))
		check("TotalRemoteUsage", formatUsage(ev.TotalRemote))
		check("TotalLocalUsage", formatUsage(ev.TotalLocal))
		// HTCondor keeps a terminated event's byte counts in single
		// precision: see docs/compatibility.md.
		check("SentBytes", float32(ev.SentBytes))
		check("ReceivedBytes", float32(ev.ReceivedBytes))
		check("TotalSentBytes", float32(ev.TotalSentBytes))
		check("TotalReceivedBytes", float32(ev.TotalReceivedBytes))
	case ImageSize:
		check("Size", ev.ImageSizeKB)
		check("MemoryUsage", ev.MemoryUsageMB)
		check("ResidentSetSize", ev.ResidentSetSizeKB)
	case ShadowException:
		check("Message", ev.Message)
	case Generic:
		check("Info", ev.Message)
	case Aborted, Released:
		check("Reason", ev.Message)
	case Suspended:
		check("NumberOfPIDs", int64(ev.NumPIDs))
	case Held:
		check("HoldReason", ev.Message)
		check("HoldReasonCode", int64(ev.HoldCode))
		check("HoldReasonSubCode", int64(ev.HoldSubCode))
	case FileTransfer:
		check("Type", int64(ev.TransferKind))
		if ev.QueueingDelay > 0 {
			check("QueueingDelay", ev.QueueingDelay)
		}
		check("Host", ev.Host)
	}
	return diffs
}
