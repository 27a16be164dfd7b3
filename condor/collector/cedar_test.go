package collector

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/condor/wire"
)

// cedarCollector serves c over CEDAR on a loopback port with FS
// authentication granting grant, and returns the port's address.
func cedarCollector(t *testing.T, c *Collector, grant []auth.Scope) (string, *cedar.Server) {
	t.Helper()
	srv := cedar.NewServer(cedar.Options{
		Methods: []cedar.Method{&cedar.FS{Domain: "test", Grant: func(uid uint32, name string) *auth.Claims {
			if grant == nil {
				return nil
			}
			return &auth.Claims{Subject: name, Scopes: grant}
		}}},
		Commands: CedarCommands(func() *Collector { return c }),
		Timeout:  20 * time.Second,
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(context.Background(), conn, nil)
		}
	}()
	return l.Addr().String(), srv
}

// htcondorClient runs a Python program with the htcondor wheel; the
// program finds the collector's address in ADDR and prints JSON.
func htcondorClient(t *testing.T, addr, params, program string) (string, error) {
	t.Helper()
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.SkipOrFail(t, "the htcondor Python wheel is not installed")
	}
	src := "import htcondor2, json, os, sys\n" +
		"htcondor2.param['SEC_CLIENT_AUTHENTICATION_METHODS'] = 'FS'\n" +
		"htcondor2.param['TOOL_DEBUG'] = 'D_SECURITY D_FULLDEBUG'\n" +
		"if os.environ.get('CEDAR_DEBUG'): htcondor2.enable_debug()\n" +
		params + "\nADDR = os.environ['ADDR']\n" + program
	cmd := exec.Command("python3", "-c", src)
	cmd.Env = append(os.Environ(), "ADDR="+addr, "HOME="+t.TempDir(), "_CONDOR_SEC_TOKEN_DIRECTORY="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func seedCollector(t *testing.T) *Collector {
	c := New(Options{})
	ctx := context.Background()
	for _, u := range []*wire.UpdateRequest{
		{Type: wire.TypeMachine, Source: "n1", Ads: []wire.Ad{
			{"Name": `"slot1@n1"`, "Cpus": "4", "Memory": "2048", "State": `"Unclaimed"`, "MyType": `"Machine"`},
			{"Name": `"slot2@n1"`, "Cpus": "8", "Memory": "4096", "State": `"Claimed"`, "MyType": `"Machine"`},
		}},
		{Type: wire.TypeSchedd, Source: "n1", Ads: []wire.Ad{
			{"Name": `"n1"`, "MyAddress": `"<127.0.0.1:9618>"`, "MyType": `"Scheduler"`},
		}},
	} {
		if _, err := c.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestCedarQueryFromHTCondorClient(t *testing.T) {
	c := seedCollector(t)
	addr, srv := cedarCollector(t, c, []auth.Scope{auth.Read})
	out, err := htcondorClient(t, addr, "", `
coll = htcondor2.Collector(ADDR)
all = coll.query(htcondor2.AdType.Startd)
some = coll.query(htcondor2.AdType.Startd, constraint='Cpus > 4', projection=['Name', 'Memory'])
again = coll.query(htcondor2.AdType.Startd, constraint='State == "Unclaimed"', projection=['Name'])
sched = coll.locate(htcondor2.DaemonType.Schedd)
print(json.dumps({
  'all': sorted(a['Name'] for a in all),
  'some': [dict(a) for a in some],
  'again': [a['Name'] for a in again],
  'sched': sched['MyAddress'],
}))
`)
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var got struct {
		All   []string         `json:"all"`
		Some  []map[string]any `json:"some"`
		Again []string         `json:"again"`
		Sched string           `json:"sched"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	if strings.Join(got.All, ",") != "slot1@n1,slot2@n1" {
		t.Errorf("all = %v", got.All)
	}
	if len(got.Some) != 1 || got.Some[0]["Name"] != "slot2@n1" || got.Some[0]["Memory"] != float64(4096) || len(got.Some[0]) != 2 {
		t.Errorf("constraint + projection = %v", got.Some)
	}
	if strings.Join(got.Again, ",") != "slot1@n1" {
		t.Errorf("second query = %v", got.Again)
	}
	if got.Sched != "<127.0.0.1:9618>" {
		t.Errorf("locate = %q", got.Sched)
	}
	if srv.Sessions() != 1 {
		t.Errorf("sessions = %d, want 1: the client's later queries resume the first session", srv.Sessions())
	}
}
