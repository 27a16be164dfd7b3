package collector

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/wire"
)

// slotAds fills a collector with n slot ads of the size pond's startd
// advertises, ten to a node.
func slotAds(tb testing.TB, n int) *Collector {
	tb.Helper()
	c := New(Options{Lifetime: time.Hour})
	for node := 0; node*10 < n; node++ {
		host := fmt.Sprintf("ep%05d", node)
		var ads []wire.Ad
		for s := 1; s <= 10 && node*10+s <= n; s++ {
			ads = append(ads, wire.Ad{
				"MyType": `"Machine"`, "TargetType": `"Job"`, "Name": strconv.Quote(fmt.Sprintf("slot%d@%s", s, host)),
				"Machine": strconv.Quote(host), "SlotID": strconv.Itoa(s), "SlotType": `"Static"`,
				"Cpus": "4", "Memory": "16384", "Disk": "100000000", "GPUs": "0", "State": `"Unclaimed"`, "Activity": `"Idle"`,
				"Arch": `"X86_64"`, "OpSys": `"LINUX"`, "OpSysAndVer": `"AlmaLinux9"`, "UidDomain": `"example.org"`,
				"FileSystemDomain": `"example.org"`, "HasFileTransfer": "true", "MyAddress": strconv.Quote("<10.0.0.1:9618>"),
				"CondorVersion": `"$CondorVersion: 25.0.0 pond $"`, "Start": "true", "Requirements": "START",
				"Rank": "0", "LoadAvg": "0.25", "TotalCpus": "40", "TotalMemory": "163840", "TotalSlots": "10",
				"EnteredCurrentState": "1764400000", "EnteredCurrentActivity": "1764400000", "KFlops": "1500000",
				"Mips": "30000", "IsWarm": "true", "HasDocker": "false", "Site": `"campus"`,
				"WantsMatlab": "false", "NumDynamicSlots": "0", "DetectedMemory": "163840", "DetectedCpus": "40",
			})
		}
		if err := c.update(nil, &wire.UpdateRequest{Type: wire.TypeMachine, Source: "startd@" + host, Ads: ads}); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

// BenchmarkCedarQuery10kSlotsPython times HTCondor's Python client
// querying 10,000 slot ads over CEDAR (FS, AES-GCM): one Python process
// runs b.N queries after a first one that sets the session up, and reports
// the seconds per query it measures.
func BenchmarkCedarQuery10kSlotsPython(b *testing.B) {
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		b.Skip("the htcondor Python wheel is not installed")
	}
	c := slotAds(b, 10000)
	addr, _ := cedarServe(b, c)
	prog := fmt.Sprintf(`
import time
coll = htcondor2.Collector(ADDR)
t0 = time.perf_counter(); first = len(coll.query(htcondor2.AdType.Startd)); t1 = time.perf_counter()
c1 = time.process_time()
for i in range(%d):
    n = len(coll.query(htcondor2.AdType.Startd))
t2 = time.perf_counter()
print(first, n, t1 - t0, (t2 - t1) / %d, (time.process_time() - c1) / %d)
`, b.N, b.N, b.N)
	b.ResetTimer()
	cpu0 := cpuTime()
	out, err := htcondorClient(b, addr, "", prog)
	server := cpuTime() - cpu0
	b.StopTimer()
	if err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 5 || f[0] != "10000" || f[1] != "10000" {
		b.Fatalf("client: %s", out)
	}
	first, _ := strconv.ParseFloat(f[2], 64)
	each, _ := strconv.ParseFloat(f[3], 64)
	b.ReportMetric(first, "s/first-query")
	client, _ := strconv.ParseFloat(f[4], 64)
	b.ReportMetric(each, "s/query")
	b.ReportMetric(client, "client-cpu-s/query")
	// The server's CPU over the whole run, the first query included.
	b.ReportMetric(server.Seconds()/float64(b.N+1), "server-cpu-s/query")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCedarQuery10kSlots times the collector answering a query of
// 10,000 slot ads on a CEDAR stream without a session key, read back with
// pond's own decoder: the server's share of the Python figure.
func BenchmarkCedarQuery10kSlots(b *testing.B) {
	c := slotAds(b, 10000)
	b.ReportAllocs()
	cpu0 := cpuTime()
	defer func() { b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op") }()
	for b.Loop() {
		cli, srv := cedarPair(b)
		go func() {
			_ = cli.PutInt(0)
			_ = cli.PutString("Query")
			_ = cli.PutString("")
			_ = cli.EndMessage()
		}()
		errc := make(chan error, 1)
		go func() { errc <- c.serveCedarQuery(context.Background(), srv, wire.TypeMachine, nil) }()
		n := 0
		for {
			more, err := cli.GetInt()
			if err != nil {
				b.Fatal(err)
			}
			if more == 0 {
				break
			}
			if _, err := cli.GetAd(); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := <-errc; err != nil || n != 10000 {
			b.Fatalf("%d ads, %v", n, err)
		}
		cli.Conn().Close()
	}
}

// cedarServe serves c over CEDAR on loopback with FS granting READ.
func cedarServe(tb testing.TB, c *Collector) (string, *cedar.Server) {
	return cedarCollectorAs(tb, c, func(user string) *auth.Claims {
		return &auth.Claims{Subject: user, Scopes: []auth.Scope{auth.Read}}
	})
}
