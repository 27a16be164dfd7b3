package agent

import (
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// relayBenchSea starts a central manager and two workers reached as reach
// says, all with TLS and tokens, and waits until a tree query from the
// central manager finds both workers.
func relayBenchSea(b *testing.B, reach string) (*relaySea, *Agent) {
	sea := newRelaySea(b)
	cm := sea.start(sea.config(&Config{Name: "cm", Role: "cm", Pool: "campus"}))
	for _, name := range []string{"w1", "w2"} {
		cfg := sea.config(&Config{Name: name, Role: "node", Pool: "campus", CondorHost: cm.APIAddr(), Reach: reach,
			Attrs: map[string]any{"Worker": true}})
		cfg.Join = []string{cm.Sea().GossipAddr()}
		sea.start(cfg)
	}
	reader := sea.client(cm.APIAddr(), auth.SeaRead)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ans, err := reader.Query(b.Context(), api.Query{Requirements: "Worker =?= true"})
		if err == nil && matchNames(ans) == "w1,w2" {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the workers are not found: %v, %v", ans, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return sea, cm
}

// BenchmarkRelayTreeQuery measures tree queries from a central manager
// that reach two workers, directly or through the central manager as
// their relay: p50 and p99 in ms.
func BenchmarkRelayTreeQuery(b *testing.B) {
	for _, reach := range []string{ReachDirect, ReachRelay} {
		b.Run("reach="+reach, func(b *testing.B) {
			sea, cm := relayBenchSea(b, reach)
			reader := sea.client(cm.APIAddr(), auth.SeaRead)
			var lat []time.Duration
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				ans, err := reader.Query(b.Context(), api.Query{Requirements: "Worker =?= true"})
				if err != nil || matchNames(ans) != "w1,w2" {
					b.Fatalf("query: %v, %v", ans, err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
		})
	}
}

// BenchmarkRelayJobs runs b.N jobs of /bin/true on two one-slot workers,
// reached directly or through their relay, and reports jobs per second
// from the submission to the last completion.
func BenchmarkRelayJobs(b *testing.B) {
	for _, reach := range []string{ReachDirect, ReachRelay} {
		b.Run("reach="+reach, func(b *testing.B) {
			sea, cm := relayBenchSea(b, reach)
			owner := "root"
			if u, err := user.Current(); err == nil {
				owner = u.Username
			}
			sc := wire.NewClient(cm.APIAddr(), sea.mint(auth.Claims{Subject: owner, Scopes: []auth.Scope{auth.Write}})).WithTLS(sea.tls).Schedd()
			work := b.TempDir()
			os.Chmod(work, 0o777)
			ctx := b.Context()
			b.ResetTimer()
			t0 := time.Now()
			nc, err := sc.NewCluster(ctx)
			if err != nil {
				b.Fatal(err)
			}
			jobs := make([]wire.Ad, b.N)
			for i := range jobs {
				jobs[i] = wire.Ad{"Cmd": `"/bin/true"`, "TransferExecutable": "false", "Iwd": strconv.Quote(work), "Out": `"/dev/null"`,
					"Err": `"/dev/null"`, "RequestMemory": "16", "RequestCpus": "1", "RequestDisk": "1024",
					"Requirements": "Worker =?= true", "JobUniverse": "5"}
			}
			if _, err := sc.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: jobs}); err != nil {
				b.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Minute)
			for {
				done, err := sc.History(ctx, &wire.QueryJobsRequest{Constraint: fmt.Sprintf("ClusterId == %d && JobStatus == 4", nc.Cluster), Projection: []string{"ProcId"}})
				if err == nil && len(done) == b.N {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d jobs done: %v", len(done), b.N, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "jobs/s")
		})
	}
}
