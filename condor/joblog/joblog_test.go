package joblog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pond-htc/pond/condor/testenv"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// sampleEvents covers every event type the writer supports.
func sampleEvents() []Event {
	res := []Resource{{Name: "Cpus", Request: "1", Allocated: "1"}, {Name: "Disk (KB)", Usage: "23", Request: "1024", Allocated: "4678"}, {Name: "Memory (MB)", Usage: "4", Request: "128", Allocated: "128"}}
	return []Event{
		{Type: Submit, Cluster: 1, Time: t0, Host: "<127.0.0.1:9618?addrs=127.0.0.1-9618&noUDP&sock=schedd_1>", Notes: "pond test"},
		{Type: Execute, Cluster: 1, Time: t0.Add(time.Second), Host: "<127.0.0.1:40001>", SlotName: "slot1@node1"},
		{Type: ExecutableError, Cluster: 1, Proc: 1, Time: t0, ErrorKind: ErrNotExecutable},
		{Type: ExecutableError, Cluster: 1, Proc: 2, Time: t0, ErrorKind: ErrBadLink},
		{Type: Evicted, Cluster: 1, Time: t0, RunRemote: Usage{User: 61 * time.Second, Sys: 2 * time.Second}, SentBytes: 10, ReceivedBytes: 20},
		{Type: Evicted, Cluster: 1, Proc: 3, Time: t0, TerminatedAndRequeued: true, TerminatedNormally: true, ReturnValue: 5,
			RunRemote: Usage{User: time.Second}, SentBytes: 29, ReceivedBytes: 144, Message: "The OnExitRemove expression 'ExitCode == 0' evaluated to False"},
		{Type: Evicted, Cluster: 1, Proc: 4, Time: t0, TerminatedAndRequeued: true, Signal: 9,
			Message: "The OnExitRemove expression 'ExitBySignal == false' evaluated to False"},
		{Type: ImageSize, Cluster: 1, Time: t0, ImageSizeKB: 1234, MemoryUsageMB: 5, ResidentSetSizeKB: 4096},
		{Type: ShadowException, Cluster: 1, Time: t0, Message: "Error from slot1@node1: it broke", SentBytes: 1},
		{Type: Generic, Cluster: 1, Time: t0, Message: "hello from pond"},
		{Type: Suspended, Cluster: 1, Time: t0, NumPIDs: 3},
		{Type: Unsuspended, Cluster: 1, Time: t0},
		{Type: Held, Cluster: 1, Time: t0, Message: "via condor_hold (by user alice)", HoldCode: 1, HoldSubCode: 7},
		{Type: Released, Cluster: 1, Time: t0, Message: "via condor_release (by user alice)"},
		{Type: FileTransfer, Cluster: 1, Time: t0, TransferKind: TransferInputStarted, Host: "<127.0.0.1:40001>"},
		{Type: FileTransfer, Cluster: 1, Time: t0, TransferKind: TransferOutputFinished, QueueingDelay: 5},
		{Type: Terminated, Cluster: 1, Time: t0.Add(5 * time.Second), TerminatedNormally: true, ReturnValue: 3,
			RunRemote: Usage{User: 7 * time.Second, Sys: time.Second}, TotalRemote: Usage{User: 90061 * time.Second},
			SentBytes: 999, ReceivedBytes: 655, TotalSentBytes: 999, TotalReceivedBytes: 655, Resources: res},
		{Type: Terminated, Cluster: 1, Proc: 1, Time: t0, Signal: 9},
		{Type: Terminated, Cluster: 1, Proc: 2, Time: t0, Signal: 11, CoreFile: "/tmp/core.1"},
		{Type: Aborted, Cluster: 12345, Proc: 999, Time: t0, Message: "via condor_rm (by user alice)"},
		{Type: JobDisconnected, Cluster: 3, Time: t0, Message: "Socket between submit and execute hosts closed unexpectedly",
			SlotName: "slot1@node2", Host: "<127.0.0.1:40002>"},
		{Type: JobReconnected, Cluster: 3, Time: t0, SlotName: "slot1@node2", Host: "<127.0.0.1:40002>", StarterHost: "<127.0.0.1:40002>"},
		{Type: JobReconnectFailed, Cluster: 3, Time: t0, Message: "Job disconnected too long: JobLeaseDuration (12 seconds) expired",
			SlotName: "slot1@node2"},
	}
}

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	for _, ev := range sampleEvents() {
		b, err := Format(ev, time.UTC)
		if err != nil {
			t.Fatalf("Format(%v): %v", ev.Type, err)
		}
		buf.Write(b)
	}
	got, err := ReadAll(&buf, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sampleEvents(), got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestFormatExact(t *testing.T) {
	tests := []struct {
		ev   Event
		want string
	}{
		{Event{Type: Submit, Cluster: 1, Time: t0, Host: "<127.0.0.1:9618>"},
			"000 (001.000.000) 2026-11-22 12:00:00 Job submitted from host: <127.0.0.1:9618>\n...\n"},
		{Event{Type: Terminated, Cluster: 1234, Proc: 5, Time: t0, TerminatedNormally: true},
			"005 (1234.005.000) 2026-11-22 12:00:00 Job terminated.\n\t(1) Normal termination (return value 0)\n" +
				"\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n" +
				"\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage\n" +
				"\t0  -  Run Bytes Sent By Job\n\t0  -  Run Bytes Received By Job\n\t0  -  Total Bytes Sent By Job\n\t0  -  Total Bytes Received By Job\n...\n"},
		{Event{Type: Held, Cluster: 2, Time: t0, Message: "line\nbreak", HoldCode: 13, HoldSubCode: 2},
			"012 (002.000.000) 2026-11-22 12:00:00 Job was held.\n\tline break\n\tCode 13 Subcode 2\n...\n"},
		{Event{Type: JobDisconnected, Cluster: 3, Time: t0, Message: "Socket between submit and execute hosts closed unexpectedly",
			SlotName: "slot1@node2", Host: "<127.0.0.1:40002>"},
			"022 (003.000.000) 2026-11-22 12:00:00 Job disconnected, attempting to reconnect\n" +
				"    Socket between submit and execute hosts closed unexpectedly\n    Trying to reconnect to slot1@node2 <127.0.0.1:40002>\n...\n"},
		{Event{Type: JobReconnected, Cluster: 3, Time: t0, SlotName: "slot1@node2", Host: "<127.0.0.1:40002>", StarterHost: "<127.0.0.1:40002>"},
			"023 (003.000.000) 2026-11-22 12:00:00 Job reconnected to slot1@node2\n" +
				"    startd address: <127.0.0.1:40002>\n    starter address: <127.0.0.1:40002>\n...\n"},
		{Event{Type: JobReconnectFailed, Cluster: 3, Time: t0, Message: "Job disconnected too long: JobLeaseDuration (12 seconds) expired",
			SlotName: "slot1@node2"},
			"024 (003.000.000) 2026-11-22 12:00:00 Job reconnection failed\n" +
				"    Job disconnected too long: JobLeaseDuration (12 seconds) expired\n    Can not reconnect to slot1@node2, rescheduling job\n...\n"},
	}
	for _, tt := range tests {
		b, err := Format(tt.ev, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("Format(%v):\n%s\nwant:\n%s", tt.ev.Type, b, tt.want)
		}
	}
	if _, err := Format(Event{Type: FileTransfer, TransferKind: 99}, nil); err == nil {
		t.Errorf("unknown transfer kind accepted")
	}
	if _, err := Format(Event{Type: Submit, Cluster: -1}, nil); err == nil {
		t.Errorf("negative cluster accepted")
	}
}

func TestReadHTCondorWritten(t *testing.T) {
	// As HTCondor itself writes them, including lines pond does not interpret.
	src := `000 (123.000.000) 11/22 12:00:00 Job submitted from host: <10.0.0.1:9618?addrs=10.0.0.1-9618>
...
001 (123.000.000) 2026-11-22 12:00:01.123 Job executing on host: <10.0.0.2:9618>
	SlotName: slot1_1@node2
	CondorScratchDir = "/var/lib/condor/execute/dir_1"
	Cpus = 1
...
005 (123.000.000) 2026-11-22 12:00:05Z Job terminated.
	(1) Normal termination (return value 0)
		Usr 0 00:00:00, Sys 0 00:00:00  -  Run Remote Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Total Remote Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage
	0  -  Run Bytes Sent By Job
	0  -  Run Bytes Received By Job
	0  -  Total Bytes Sent By Job
	0  -  Total Bytes Received By Job
	Partitionable Resources :    Usage  Request Allocated
	   Cpus                 :                 1         1
	   Disk (KB)            :       23        1      4678
	Job terminated of its own accord at 2026-11-22T12:00:05Z with exit-code 0.
...
`
	rd := NewReader(strings.NewReader(src), time.UTC)
	rd.now = func() time.Time { return t0.Add(time.Hour) }
	var got []Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if len(got) != 3 {
		t.Fatalf("got %d events", len(got))
	}
	if !got[0].Time.Equal(t0) || got[0].Cluster != 123 {
		t.Errorf("submit: %+v", got[0])
	}
	if got[1].SlotName != "slot1_1@node2" || len(got[1].Body) != 2 || got[1].Time.Nanosecond() != 123000000 {
		t.Errorf("execute: %+v", got[1])
	}
	if !got[2].TerminatedNormally || len(got[2].Resources) != 2 || got[2].Resources[1].Allocated != "4678" ||
		len(got[2].Body) != 1 || !strings.HasPrefix(got[2].Body[0], "Job terminated of its own accord") {
		t.Errorf("terminated: %+v", got[2])
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"not a header", "hello\n...\n", "1:1: expected an event header"},
		{"bad id", "005 (1.x.0) 2026-11-22 12:00:00 Job terminated.\n...\n", "1:6: job id \"1.x.0\" is not cluster.proc.subproc"},
		{"bad time", "008 (001.000.000) 2026-13-45 99:00:00 x\n...\n", "1:19: bad event time"},
		{"no time", "008 (001.000.000)\n...\n", "expected a date and time"},
		{"unterminated", "008 (001.000.000) 2026-11-22 12:00:00 x\n", "event not terminated"},
		{"partial line", "008 (001.000.000) 2026-11-22 12:00:00 x\n...", "event not terminated"},
		{"bad return", "005 (001.000.000) 2026-11-22 12:00:00 Job terminated.\n\t(1) Normal termination (return value x)\n...\n", "2:2: bad return value"},
		{"bad usage", "005 (001.000.000) 2026-11-22 12:00:00 Job terminated.\n\t\tUsr x  -  Run Remote Usage\n...\n", "2:3: bad usage"},
		{"bad hold code", "012 (001.000.000) 2026-11-22 12:00:00 Job was held.\n\tCode x\n...\n", "2:2: expected \"Code N Subcode M\""},
		{"bad image size", "006 (001.000.000) 2026-11-22 12:00:00 Image size of job updated: big\n...\n", "1:1: bad image size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadAll(strings.NewReader(tt.src), time.UTC)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	_, err := ReadAll(strings.NewReader("008 (001.000.000) 2026-11-22 12:00:00 x\n"), time.UTC)
	if !errors.Is(err, ErrIncomplete) {
		t.Errorf("unterminated event: %v is not ErrIncomplete", err)
	}
}

func TestConcurrentAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.log")
	const writers, perWriter = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lw := NewWriter(path, WriterOptions{Location: time.UTC}) // separate files, shared lock
			for i := 0; i < perWriter; i++ {
				ev := Event{Type: Terminated, Cluster: w + 1, Proc: i, Time: t0, TerminatedNormally: true, ReturnValue: i % 7}
				if err := lw.Write(Event{Type: Submit, Cluster: w + 1, Proc: i, Time: t0, Host: "<x>"}, ev); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	events, off, err := ReadFile(path, 0, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); off != st.Size() {
		t.Errorf("offset %d, file size %d", off, st.Size())
	}
	if len(events) != 2*writers*perWriter {
		t.Fatalf("read %d events, want %d", len(events), 2*writers*perWriter)
	}
	// Each Write's two events stay adjacent.
	for i := 0; i < len(events); i += 2 {
		if events[i].Type != Submit || events[i+1].Type != Terminated || events[i].ID() != events[i+1].ID() {
			t.Fatalf("events %d,%d interleaved: %v %s / %v %s", i, i+1, events[i].Type, events[i].ID(), events[i+1].Type, events[i+1].ID())
		}
	}
}

func TestReadFileFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.log")
	w := NewWriter(path, WriterOptions{Location: time.UTC, Sync: true})
	if err := w.Write(Event{Type: Submit, Cluster: 1, Time: t0, Host: "<h>"}); err != nil {
		t.Fatal(err)
	}
	evs, off, err := ReadFile(path, 0, time.UTC)
	if err != nil || len(evs) != 1 {
		t.Fatalf("first read: %v, %v", evs, err)
	}
	// A half-written event is left for later.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("001 (001.000.000) 2026-11-22 12:00:01 Job executing on host: <e>\n"); err != nil {
		t.Fatal(err)
	}
	evs, off2, err := ReadFile(path, off, time.UTC)
	if err != nil || len(evs) != 0 || off2 != off {
		t.Fatalf("partial read: %v, %d, %v", evs, off2, err)
	}
	if _, err := f.WriteString("...\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	evs, _, err = ReadFile(path, off, time.UTC)
	if err != nil || len(evs) != 1 || evs[0].Type != Execute || evs[0].Host != "<e>" {
		t.Fatalf("completed read: %v, %v", evs, err)
	}
}

// TestOracleHTCondorReader checks that HTCondor's own reader
// (htcondor.JobEventLog) understands what we write.
func TestOracleHTCondorReader(t *testing.T) {
	mod := ""
	for _, m := range []string{"htcondor2", "htcondor"} {
		if exec.Command("python3", "-c", "import "+m).Run() == nil {
			mod = m
			break
		}
	}
	if mod == "" {
		testenv.SkipOrFail(t, "HTCondor Python bindings not available: pip install htcondor")
	}
	path := filepath.Join(t.TempDir(), "job.log")
	w := NewWriter(path, WriterOptions{Location: time.Local})
	want := sampleEvents()
	if err := w.Write(want...); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`
import json, sys
import %s as h
out = []
for e in h.JobEventLog(sys.argv[1]).events(0):
    d = {k: e[k] for k in e.keys()}
    d["_type"] = int(e.type)
    d["_cluster"] = e.cluster
    d["_proc"] = e.proc
    d["_timestamp"] = e.timestamp
    out.append(d)
print(json.dumps(out, default=str))
`, mod)
	out, err := exec.Command("python3", "-c", script, path).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("HTCondor reader failed: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got) != len(want) {
		t.Fatalf("HTCondor read %d events, we wrote %d", len(got), len(want))
	}
	num := func(v any) int64 {
		f, _ := v.(float64)
		return int64(f)
	}
	for i, ev := range want {
		g := got[i]
		if num(g["_type"]) != int64(ev.Type) || num(g["_cluster"]) != int64(ev.Cluster) || num(g["_proc"]) != int64(ev.Proc) {
			t.Errorf("event %d: HTCondor sees type %v job %v.%v, wrote %v %s", i, g["_type"], g["_cluster"], g["_proc"], ev.Type, ev.ID())
		}
		if num(g["_timestamp"]) != ev.Time.Unix() {
			t.Errorf("event %d: HTCondor timestamp %v, wrote %d", i, g["_timestamp"], ev.Time.Unix())
		}
		check := func(key string, wantV any) {
			t.Helper()
			gv, ok := g[key]
			if !ok {
				t.Errorf("event %d (%v): HTCondor has no %s", i, ev.Type, key)
				return
			}
			switch w := wantV.(type) {
			case int64:
				if num(gv) != w {
					t.Errorf("event %d (%v): %s = %v, wrote %d", i, ev.Type, key, gv, w)
				}
			default:
				if fmt.Sprint(gv) != fmt.Sprint(w) {
					t.Errorf("event %d (%v): %s = %v, wrote %v", i, ev.Type, key, gv, w)
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
		case ExecutableError:
			check("ExecuteErrorType", int64(ev.ErrorKind))
		case Evicted:
			check("Checkpointed", ev.Checkpointed)
			check("SentBytes", ev.SentBytes)
			check("RunRemoteUsage", formatUsage(ev.RunRemote))
		case Terminated:
			check("TerminatedNormally", ev.TerminatedNormally)
			check("TotalRemoteUsage", formatUsage(ev.TotalRemote))
			if ev.TerminatedNormally {
				check("ReturnValue", int64(ev.ReturnValue))
				check("RequestMemory", int64(128))
				check("DiskUsage", int64(23))
			} else {
				check("TerminatedBySignal", int64(ev.Signal))
				if ev.CoreFile != "" {
					check("CoreFile", ev.CoreFile)
				}
			}
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
			if ev.Host != "" {
				check("Host", ev.Host)
			}
		}
	}
}

func BenchmarkWrite(b *testing.B) {
	w := NewWriter(filepath.Join(b.TempDir(), "job.log"), WriterOptions{})
	ev := Event{Type: Terminated, Cluster: 1, Time: t0, TerminatedNormally: true}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; i < 1000; i++ {
		for _, ev := range sampleEvents() {
			bs, _ := Format(ev, time.UTC)
			buf.Write(bs)
		}
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadAll(bytes.NewReader(data), time.UTC); err != nil {
			b.Fatal(err)
		}
	}
}
