package schedd_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/cedar/cedartest"
	"github.com/pond-htc/pond/condor/schedd"
)

// BenchmarkCEDARSubmit submits 10,000 procs in one queue-management
// transaction over a real loopback socket with FS and AES-GCM, the way
// htcondor2.Schedd.submit does (the cluster ad once, each proc's own
// attributes without waiting for replies, one commit), to a schedd whose
// job queue is SQLite in a temporary directory. The target is under 5 s
// per submit. peak-MiB is the most heap client and schedd held at once
// (garbage not yet collected included) over what they held before.
func BenchmarkCEDARSubmit(b *testing.B) {
	const procs = 10000
	n := start(b)
	addr := serveCEDAR(b, n.s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The cluster ad htcondor2 sends for a plain job, less what
	// submitProcs sends itself, and the three attributes it sends per proc.
	cluster := map[string]string{"Iwd": `"/tmp"`, "Environment": `""`, "Err": `"/dev/null"`, "Out": `"/dev/null"`,
		"In": `"/dev/null"`, "Rank": "0.0", "Requirements": `(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX")`,
		"ShouldTransferFiles": `"IF_NEEDED"`, "WhenToTransferOutput": `"ON_EXIT"`, "TransferIn": "false",
		"CondorVersion": `"$CondorVersion: 25.0.0 2025-01-01 $"`, "CondorPlatform": `"$CondorPlatform: X86_64-Ubuntu_24.04 $"`,
		"JobSubmitMethod": "3", "SubmitVersion": `"$CondorVersion: 25.0.0 2025-01-01 $"`, "ImageSize": "1", "ExecutableSize": "1",
		"DiskUsage": "1", "RequestDisk": "DiskUsage", "RequestMemory": "ifthenelse(MemoryUsage =!= undefined, MemoryUsage, (ImageSize + 1023) / 1024)",
		"JobPrio": "0", "JobNotification": "0", "JobLeaseDuration": "2400", "LeaveJobInQueue": "false", "MaxHosts": "1", "MinHosts": "1",
		"CurrentHosts": "0", "HoldReasonCode": "15", "TransferInputSizeMB": "0", "FileSystemDomain": `"example.org"`}
	for _, a := range []string{"CommittedSlotTime", "CommittedSuspensionTime", "CommittedTime", "CumulativeRemoteSysCpu",
		"CumulativeRemoteUserCpu", "CumulativeSlotTime", "CumulativeSuspensionTime", "ExitBySignal", "ExitStatus",
		"LastSuspensionTime", "NumCkpts", "NumJobCompletions", "NumJobStarts", "NumRestarts", "NumSystemHolds",
		"RemoteSysCpu", "RemoteUserCpu", "RemoteWallClockTime", "TotalSuspensions", "QDate", "EnteredCurrentStatus"} {
		cluster[a] = "0"
	}
	perProc := func(i int) [][2]string { return [][2]string{{"ProcId", strconv.Itoa(i)}, {"JobStatus", "5"}} }
	cpu0 := cedartest.CPUTime()
	stop := schedd.SamplePeakHeap()
	for b.Loop() {
		_, rval, reason, err := submitProcs(ctx, addr, procs, cluster, perProc, false)
		if err != nil || rval != 0 {
			b.Fatalf("submit: %d %q %v", rval, reason, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(stop())/(1<<20), "peak-MiB")
	b.ReportMetric((cedartest.CPUTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	if got := queued(b, n); got%procs != 0 || got == 0 {
		b.Fatalf("%d jobs queued", got)
	}
}
