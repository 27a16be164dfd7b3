package console

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// benchScale is the benchmark's pool: a central manager whose collector
// holds slots slot ads on machines machines (each a member of the sea),
// and a schedd whose queue holds jobs jobs of benchOwners owners, of
// which the claimed slots run one each; clients viewers at once.
type benchScale struct{ slots, machines, jobs, clients int }

// benchFull is the scale the budget is for; benchSmall the one of a
// -short run (make bench-smoke), which only checks that the benchmark
// works, at a tenth of the size and without the budget.
var (
	benchFull  = benchScale{slots: 10_000, machines: 2_500, jobs: 12_000, clients: 100}
	benchSmall = benchScale{slots: 1_000, machines: 250, jobs: 1_200, clients: 10}
)

const (
	benchOwners = 12
	// benchBudget is what a page may take at the 99th percentile.
	benchBudget = 200 * time.Millisecond
)

// benchPages are the pages an operator opens, each fetched by every
// client.
var benchPages = []string{"/ui/", "/ui/slots", "/ui/slots?state=Claimed&start=5000", "/ui/history", "/ui/history?machine=node0007.pool.example.org", "/ui/jobs",
	"/ui/jobs?owner=user7&status=idle", "/ui/sea", "/ui/failover", "/ui/credentials"}

// newBenchPool is a test pool at scale sc.
func newBenchPool(tb testing.TB, sc benchScale) *testPool {
	tb.Helper()
	p := newTestPool(tb)
	ctx := context.Background()
	addr := p.srv.Listener.Addr().String()

	s, err := schedd.New(ctx, schedd.Options{Config: config.New(config.Options{}), Name: "schedd@cm",
		Address: addr, DataDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	p.mux.Handle(wire.PathPrefix+"schedd/", auth.Require(p.v, auth.Read, http.StripPrefix(wire.PathPrefix+"schedd", s.Handler())))
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.sub"), nil, 0o644); err != nil {
		tb.Fatal(err)
	}
	queue := wire.NewClient(addr, p.token(tb, time.Hour, auth.Read, auth.Write)).WithTLS(p.srv.Client().Transport.(*http.Transport).TLSClientConfig).Schedd()
	per := sc.jobs / benchOwners
	f, err := submit.Parse(filepath.Join(dir, "job.sub"), []byte(fmt.Sprintf("executable = /bin/sleep\narguments = 3600\nrequest_memory = 2048\nqueue %d\n", per)))
	if err != nil {
		tb.Fatal(err)
	}
	for o := 0; o < benchOwners; o++ {
		if _, err := tools.SubmitFile(ctx, queue, f, submit.Options{Owner: "user" + strconv.Itoa(o), SubmitDir: dir,
			Env: []string{}, LookupEnv: func(string) (string, bool) { return "", false }}); err != nil {
			tb.Fatalf("submitting the queue: %v", err)
		}
	}

	ads := []wire.Ad{}
	for i := 0; i < sc.slots; i++ {
		m := fmt.Sprintf("node%04d.pool.example.org", i%sc.machines)
		ad := wire.Ad{"MyType": `"Machine"`, "Name": fmt.Sprintf(`"slot%d@%s"`, i/sc.machines+1, m), "Machine": `"` + m + `"`,
			"Cpus": "1", "Memory": "4096", "State": `"Unclaimed"`, "Activity": `"Idle"`, "OpSys": `"LINUX"`, "Arch": `"X86_64"`,
			"StartdIpAddr": `"<10.0.0.1:9618>"`, "MyAddress": `"<10.0.0.1:9618>"`}
		if i%4 != 3 { // three slots in four run a job
			o := i % benchOwners
			ad["State"], ad["Activity"] = `"Claimed"`, `"Busy"`
			ad["RemoteUser"] = fmt.Sprintf(`"user%d@pool.example.org"`, o)
			ad["RemoteOwner"] = ad["RemoteUser"]
			ad["JobId"] = fmt.Sprintf(`"%d.%d"`, o+1, i/benchOwners)
		}
		ads = append(ads, ad)
		if len(ads) == 4 || i == sc.slots-1 {
			if _, err := p.coll.Update(ctx, &wire.UpdateRequest{Type: wire.TypeMachine, Source: "startd@" + m, Ads: ads}); err != nil {
				tb.Fatal(err)
			}
			ads = []wire.Ad{}
		}
	}
	if _, err := p.coll.Update(ctx, &wire.UpdateRequest{Type: wire.TypeSchedd, Source: "schedd@cm", Ads: []wire.Ad{{
		"MyType": `"Scheduler"`, "Name": `"schedd@cm"`, "Machine": `"cm"`, "PondAddress": `"` + addr + `"`}}}); err != nil {
		tb.Fatal(err)
	}
	members := make([]api.Member, 0, sc.machines+1)
	members = append(members, api.Member{Name: "cm", Addr: "10.0.0.1", Port: 7946, Status: "alive", Reach: "direct",
		Tags: map[string]string{api.TagRole: "cm", api.TagPool: "test-pool"}})
	for i := 0; i < sc.machines; i++ {
		members = append(members, api.Member{Name: fmt.Sprintf("node%04d", i), Addr: "10.0.1.1", Port: 7946, Status: "alive", Reach: "direct",
			Tags: map[string]string{api.TagRole: "worker", api.TagPool: "test-pool", api.TagPond: "pond" + strconv.Itoa(i%10)}})
	}
	p.mux.Handle("GET "+api.PathMembers, auth.Require(p.v, auth.SeaRead, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, members)
	})))
	return p
}

// BenchmarkConsole fetches each page of the console of a pool of 10,000
// slots with 100 logged-in clients at once, b.N rounds of one fetch per
// client, reports the latencies' p50 and p99 (ms) of each page and its
// CPU time, and fails a page whose p99 is over benchBudget. Run it with
//
//	go test -run '^$' -bench BenchmarkConsole -benchtime 5x ./overlay/console/
func BenchmarkConsole(b *testing.B) {
	sc := benchFull
	if testing.Short() {
		sc = benchSmall
	}
	p := newBenchPool(b, sc)
	cookies := make([]*http.Cookie, sc.clients)
	for i := range cookies {
		cookies[i] = sessionCookie(b, p.login(b, p.token(b, time.Hour, auth.Read, auth.SeaRead), nil))
	}
	client := p.client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = sc.clients
	// Each client connects (a TLS handshake) before the pages are timed:
	// a browser keeps its connection from page to page.
	fetchAll(b, client, p.url+Prefix+"static/console.css", cookies, 1)
	for _, page := range benchPages {
		// A first view reads what the page shows; the next views, of any
		// viewer of the same scopes, share it (shared.go).
		fetchAll(b, client, p.url+page, cookies[:1], 1)
		name := strings.TrimPrefix(page, Prefix)
		if name == "" {
			name = "overview"
		}
		b.Run(name, func(b *testing.B) {
			cpu0 := cpuTime()
			lat := fetchAll(b, client, p.url+page, cookies, b.N)
			cpu := cpuTime() - cpu0
			p50, p99 := percentile(lat, 50), percentile(lat, 99)
			// The CPU time of a page (server, console and client, all in
			// this process) tells the page's cost apart from the load of
			// the machine.
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(lat)), "cpu-ms/page")
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
			if p99 > benchBudget && !testing.Short() {
				b.Errorf("%s: p99 %v over %v (p50 %v, %.2f cpu-ms/page)", page, p99, benchBudget, p50, float64(cpu.Microseconds())/1000/float64(len(lat)))
			}
		})
	}
}

// fetchAll runs rounds of one GET of url by each of the clients (their
// cookies) at once, and returns every fetch's latency.
func fetchAll(tb testing.TB, client *http.Client, url string, cookies []*http.Cookie, rounds int) []time.Duration {
	tb.Helper()
	var (
		mu  sync.Mutex
		lat []time.Duration
	)
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		for _, ck := range cookies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.AddCookie(ck)
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					tb.Error(err)
					return
				}
				n, _ := drain(resp)
				d := time.Since(start)
				if resp.StatusCode != http.StatusOK || n == 0 {
					tb.Errorf("GET %s: %d (%d bytes)", url, resp.StatusCode, n)
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	return lat
}

func drain(resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	var n int64
	buf := make([]byte, 32<<10)
	for {
		k, err := resp.Body.Read(buf)
		n += int64(k)
		if err != nil {
			return n, nil
		}
	}
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentile is the q-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*q + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}
