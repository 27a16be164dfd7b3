package daemon_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/wire"
)

// allScopes are every scope a token may hold.
var allScopes = []auth.Scope{auth.Read, auth.Write, auth.Administrator, auth.Daemon, auth.AdvertiseStartd,
	auth.AdvertiseSchedd, auth.AdvertiseMaster, auth.Negotiator, auth.SeaRead, auth.SeaWrite, auth.SeaAdmin}

// routeScopes says, for every route of the daemons' wire, which tokens of a
// single scope it lets through, as HTCondor's daemons would: written out
// here rather than read from daemon.Routes, so that a change of a route's
// level shows as a failing test.
var routeScopes = map[string][]auth.Scope{
	"collector/update":      {auth.AdvertiseStartd, auth.AdvertiseSchedd, auth.AdvertiseMaster, auth.Daemon},
	"collector/invalidate":  {auth.AdvertiseStartd, auth.AdvertiseSchedd, auth.AdvertiseMaster, auth.Daemon},
	"collector/query":       {auth.Read, auth.Write, auth.Administrator, auth.Daemon},
	"collector/history":     {auth.Read, auth.Write, auth.Administrator, auth.Daemon},
	"collector/apply":       {auth.Administrator},
	"negotiator/reschedule": {auth.Write, auth.Administrator, auth.Daemon},
	"schedd/newcluster":     {auth.Write, auth.Administrator, auth.Daemon},
	"schedd/submit":         {auth.Write, auth.Administrator, auth.Daemon},
	"schedd/submitfactory":  {auth.Write, auth.Administrator, auth.Daemon},
	"schedd/newclusters":    {auth.Write, auth.Administrator, auth.Daemon},
	"schedd/submitbatch":    {auth.Write, auth.Administrator, auth.Daemon},
	"schedd/submitdigest":   {auth.Write, auth.Administrator, auth.Daemon},
	"schedd/act":            {auth.Write, auth.Administrator, auth.Daemon},
	"schedd/query":          {auth.Read, auth.Write, auth.Administrator, auth.Daemon},
	"schedd/querystream":    {auth.Read, auth.Write, auth.Administrator, auth.Daemon},
	"schedd/summary":        {auth.Read, auth.Write, auth.Administrator, auth.Daemon},
	"schedd/history":        {auth.Read, auth.Write, auth.Administrator, auth.Daemon},
	"schedd/idle":           {auth.Negotiator, auth.Daemon},
	"schedd/matches":        {auth.Negotiator, auth.Daemon},
	"schedd/jobreport":      {auth.Daemon},
	"schedd/claiminfo":      {auth.Daemon},
	"schedd/transfer":       {auth.Daemon},
	"schedd/streamoutput":   {auth.Daemon},
	"schedd/tail":           {auth.Write, auth.Administrator, auth.Daemon},
	"startd/joboutput":      {auth.Daemon},
	"startd/claim":          {auth.Daemon},
	"startd/activate":       {auth.Daemon},
	"startd/release":        {auth.Daemon},
	"startd/vacate":         {auth.Daemon},
	"startd/claiminfo":      {auth.Daemon},
	"startd/transfer":       {auth.Daemon},
	"startd/quarantine":     {auth.Administrator},
	"startd/drain":          {auth.Administrator},
	"master/info":           {auth.Read, auth.Write, auth.Administrator, auth.Daemon},
	"master/reconfig":       {auth.Administrator},
}

// harmless are request bodies that change nothing when a route lets them
// through (they select no job, name no claim, or are incomplete).
var harmless = map[string]any{
	"schedd/act":           wire.ActRequest{Action: wire.ActHold, Args: []string{"999"}},
	"schedd/submit":        wire.SubmitRequest{Cluster: 0},
	"schedd/submitfactory": wire.SubmitFactoryRequest{Cluster: 0},
	"schedd/newclusters":   wire.NewClustersRequest{Count: 0},
	"schedd/submitbatch":   wire.SubmitBatchRequest{},
	"schedd/submitdigest":  wire.SubmitDigestRequest{Cluster: 0},
	"schedd/matches":       wire.MatchesRequest{Negotiator: "test"},
	"startd/claim":         wire.ClaimRequest{ClaimID: "no-such-claim"},
	"startd/activate":      wire.ActivateRequest{ClaimID: "no-such-claim"},
	"startd/release":       wire.ReleaseRequest{ClaimID: "no-such-claim"},
	"startd/vacate":        wire.VacateRequest{ClaimID: "no-such-claim"},
	"schedd/jobreport":     wire.JobReport{ClaimID: "no-such-claim", JobID: "999.0", Kind: wire.ReportUpdate},
	"schedd/streamoutput":  wire.StreamChunk{ClaimID: "no-such-claim", JobID: "999.0", Stream: wire.StreamStdout},
	"schedd/tail":          wire.JobOutputRequest{JobID: "999.0", Stream: wire.StreamStdout},
	"startd/joboutput":     wire.JobOutputRequest{ClaimID: "no-such-claim", JobID: "999.0", Stream: wire.StreamStdout},
	"startd/drain":         wire.DrainRequest{Cancel: true},
}

// authPool starts a node that runs every daemon, with one job of alice's
// and one of bob's queued that never match (so that the queue holds
// still).
func authPool(t *testing.T) *testpool.Node {
	t.Helper()
	n := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD"})
	for _, owner := range []string{"alice", "bob"} {
		sc := wire.NewSchedd(n.Addr, testpool.Token(t, owner, auth.Write))
		submitText(t, sc, t.TempDir(), owner, "executable = /bin/true\nrequirements = false\nqueue\n")
	}
	// The pool holds still once the master, the startd and both
	// submitters are advertised: the schedd advertises its submitters
	// after their jobs.
	testpool.Eventually(t, 10*time.Second, "the master's, the startd's and the submitters' ads", func() bool {
		ads := snapshot(t, n).ads
		return strings.Contains(ads, `"DaemonMaster"`) && strings.Contains(ads, `"Machine"`) && strings.Count(ads, `"Submitter"`) == 2
	})
	return n
}

// state is what a refused request must not change.
type state struct {
	jobs string // id, Owner, JobStatus of each queued job
	ads  string // type and name of each ad in the collector
}

func snapshot(t *testing.T, n *testpool.Node) state {
	t.Helper()
	c := n.Client()
	jobs, err := c.Schedd().Queue(context.Background(), &wire.QueryJobsRequest{Projection: []string{"Owner", "JobStatus", "HoldReason"}})
	if err != nil {
		t.Fatal(err)
	}
	var s state
	for _, j := range jobs {
		s.jobs += fmt.Sprintf("%s %s %s %s;", j.ID, j.Ad["Owner"], j.Ad["JobStatus"], j.Ad["HoldReason"])
	}
	ads, err := c.Collector().Query(context.Background(), &wire.QueryAdsRequest{Type: wire.TypeAny, Projection: []string{"MyType", "Name"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ads {
		s.ads += a["MyType"] + " " + a["Name"] + ";"
	}
	return s
}

func status(err error) int {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Status
	}
	if err != nil {
		return -1
	}
	return 200
}

// TestWireAuthorization calls every route of the daemons' wire with no
// token, a token of another key, an expired token, and a token of each
// scope, and checks that the route answers 401 or 403 unless the scope is
// one HTCondor would let through, and that no refused request changed the
// queue, the collector or the next cluster id.
func TestWireAuthorization(t *testing.T) {
	t.Parallel()
	n := authPool(t)
	routes := map[string]bool{}
	for _, r := range daemon.Routes() {
		routes[r.Path] = true
		if _, ok := routeScopes[r.Path]; !ok {
			t.Errorf("route %s is not covered by this test", r.Path)
		}
	}
	for p := range routeScopes {
		if !routes[p] {
			t.Errorf("this test covers %s, which the master does not serve", p)
		}
	}
	other, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	wrongKey, err := auth.Mint(other, auth.Claims{Issuer: testpool.Issuer, Subject: "mallory", Scopes: allScopes, Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	expired, err := testpool.TokenErr("alice", -time.Minute, allScopes...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := n.Client().Schedd()
	first, err := admin.NewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, n)
	call := func(path, token string, sc auth.Scope) int {
		body := harmless[path]
		if strings.HasPrefix(path, "collector/") && path != "collector/query" && path != "collector/history" && path != "collector/apply" {
			// An update or withdrawal of no ads, of the type the scope
			// advertises.
			typ := map[auth.Scope]string{auth.AdvertiseStartd: wire.TypeMachine, auth.AdvertiseSchedd: wire.TypeSchedd,
				auth.AdvertiseMaster: wire.TypeMaster}[sc]
			body = wire.UpdateRequest{Type: cmp.Or(typ, wire.TypeNegotiator), Source: "nobody@x"}
		}
		if body == nil {
			body = struct{}{}
		}
		return status(wire.NewClient(n.Addr, token).Call(ctx, path, body, nil))
	}
	// The refused calls first, and nothing they did may show.
	for _, path := range slices.Sorted(maps.Keys(routeScopes)) {
		for _, tc := range []struct{ name, token string }{{"no token", ""}, {"wrong key", wrongKey}, {"expired", expired}, {"garbage", "abc.def.ghi"}} {
			if got := call(path, tc.token, ""); got != 401 {
				t.Errorf("%s with %s: HTTP %d, want 401", path, tc.name, got)
			}
		}
		for _, sc := range allScopes {
			if slices.Contains(routeScopes[path], sc) {
				continue
			}
			if got := call(path, testpool.Token(t, "mallory", sc), sc); got != 403 {
				t.Errorf("%s with %s: HTTP %d, want 403", path, sc.Name(), got)
			}
		}
	}
	if after := snapshot(t, n); after != before {
		t.Errorf("refused requests changed the pool:\nbefore %+v\nafter  %+v", before, after)
	}
	if next, err := admin.NewCluster(ctx); err != nil || next.Cluster != first.Cluster+1 {
		t.Errorf("next cluster %+v, %v after refused requests; want %d", next, err, first.Cluster+1)
	}
	// The granted ones reach the daemon (which may find the request
	// wanting, but does not refuse the caller).
	for _, path := range slices.Sorted(maps.Keys(routeScopes)) {
		for _, sc := range routeScopes[path] {
			if got := call(path, testpool.Token(t, "node/x", sc), sc); got == 401 || got == 403 {
				t.Errorf("%s with %s: HTTP %d, want it let through", path, sc.Name(), got)
			}
		}
	}
	if after := snapshot(t, n); after.jobs != before.jobs {
		t.Errorf("harmless requests changed the queue:\nbefore %s\nafter  %s", before.jobs, after.jobs)
	}
	// An unknown path is no route.
	if got := call("schedd/nope", testpool.Token(t, "admin", allScopes...), ""); got != 404 {
		t.Errorf("unknown route: HTTP %d, want 404", got)
	}
}

// TestOwnerFromToken checks that the schedd takes a job's Owner from the
// caller's token: a user's jobs are its own whatever the ad says, a user or
// a node may not queue jobs for someone else, an administrator may, and a
// user removes, holds and releases only its own jobs.
func TestOwnerFromToken(t *testing.T) {
	t.Parallel()
	n := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"})
	ctx := context.Background()
	schedd := func(subject string, scopes ...auth.Scope) *wire.Schedd {
		return wire.NewSchedd(n.Addr, testpool.Token(t, subject, scopes...))
	}
	alice, bob := schedd("alice", auth.Write), schedd("bob", auth.Write)
	node, admin := schedd("node/exec1", auth.Daemon), schedd("root", auth.Administrator)
	job := func(owner string) wire.Ad {
		a := wire.Ad{"Cmd": `"/bin/true"`, "Requirements": "false", "JobStatus": "1"}
		if owner != "" {
			a["Owner"] = fmt.Sprintf("%q", owner)
		}
		return a
	}
	submit := func(sc *wire.Schedd, owner string) (int, error) {
		nc, err := sc.NewCluster(ctx)
		if err != nil {
			return 0, err
		}
		_, err = sc.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{job(owner)}})
		return nc.Cluster, err
	}
	owner := func(cluster int) string {
		jobs, err := admin.Queue(ctx, &wire.QueryJobsRequest{Args: []string{fmt.Sprint(cluster)}})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("cluster %d: %v, %v", cluster, jobs, err)
		}
		return jobs[0].Ad["Owner"] + " " + jobs[0].Ad["User"]
	}
	if nc, err := alice.NewCluster(ctx); err != nil || nc.Owner != "alice" {
		t.Errorf("NewCluster tells alice the Owner %+v, %v; want alice", nc, err)
	}
	for _, tt := range []struct {
		name   string
		sc     *wire.Schedd
		claim  string
		status int
		want   string
	}{
		{"own name", alice, "alice", 200, `"alice" "alice@`},
		{"no Owner", alice, "", 200, `"alice" "alice@`},
		{"another's name", alice, "bob", 403, ""},
		{"a node as a user", node, "alice", 403, ""},
		{"a node as itself", node, "", 200, `"node/exec1" "node/exec1@`},
		{"an administrator for a user", admin, "carol", 200, `"carol"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := admin.Queue(ctx, &wire.QueryJobsRequest{})
			cluster, err := submit(tt.sc, tt.claim)
			if got := status(err); got != tt.status {
				t.Fatalf("submit: HTTP %d (%v), want %d", got, err, tt.status)
			}
			if tt.status != 200 {
				if after, _ := admin.Queue(ctx, &wire.QueryJobsRequest{}); len(after) != len(before) {
					t.Errorf("a refused submit queued jobs: %d before, %d after", len(before), len(after))
				}
				return
			}
			if got := owner(cluster); !strings.HasPrefix(got, tt.want) {
				t.Errorf("Owner and User %s, want %s...", got, tt.want)
			}
		})
	}

	bobs, err := submit(bob, "")
	if err != nil {
		t.Fatal(err)
	}
	bobJob := fmt.Sprint(bobs)
	// Named jobs of another user are refused, and stay as they were.
	for _, act := range []string{wire.ActRemove, wire.ActHold} {
		if _, err := alice.Act(ctx, &wire.ActRequest{Action: act, Args: []string{bobJob}}); status(err) != 403 {
			t.Errorf("alice's %s of bob's job: %v, want 403", act, err)
		}
	}
	// "All" is everything of one's own.
	changed, err := alice.Act(ctx, &wire.ActRequest{Action: wire.ActHold, All: true})
	if err != nil || changed.Count != 2 {
		t.Errorf("alice holds all: %+v, %v; want her 2 jobs", changed, err)
	}
	jobs, err := admin.Queue(ctx, &wire.QueryJobsRequest{Projection: []string{"Owner", "JobStatus"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		held := j.Ad["JobStatus"] == "5"
		if held != (j.Ad["Owner"] == `"alice"`) {
			t.Errorf("job %s of %s: JobStatus %s after alice held all hers", j.ID, j.Ad["Owner"], j.Ad["JobStatus"])
		}
	}
	// An administrator acts on anyone's.
	if changed, err := admin.Act(ctx, &wire.ActRequest{Action: wire.ActRemove, Args: []string{bobJob}}); err != nil || changed.Count != 1 {
		t.Errorf("administrator removes bob's job: %+v, %v", changed, err)
	}
}

// TestPoolPasswordWarns checks that a pool password in the configuration,
// which nothing uses any more, is warned about.
func TestPoolPasswordWarns(t *testing.T) {
	t.Parallel()
	for _, knob := range []string{"POOL_PASSWORD", "SEC_POOL_PASSWORD_FILE"} {
		var buf bytes.Buffer
		cfg := testpool.Config(t, testpool.Knobs{"DAEMON_LIST": "MASTER", knob: "hunter2"})
		m, err := daemon.Start(context.Background(), daemon.Options{Config: cfg, Name: "n", Address: "127.0.0.1:1", DataDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		m.Stop(context.Background())
		if !strings.Contains(buf.String(), knob+" is set but no longer used") || strings.Contains(buf.String(), "hunter2") {
			t.Errorf("%s: log %q, want a warning that does not show the value", knob, buf.String())
		}
	}
}
