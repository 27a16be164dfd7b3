package collector

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/cedar/cedartest"
	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/condor/wire"
)

// cedarCollector serves c over CEDAR on a loopback port with FS
// authentication granting grant, and returns the port's address.
func cedarCollector(t *testing.T, c *Collector, grant []auth.Scope) (string, *cedar.Server) {
	t.Helper()
	return cedarCollectorAs(t, c, func(name string) *auth.Claims {
		if grant == nil {
			return nil
		}
		return &auth.Claims{Subject: name, Scopes: grant}
	})
}

// cedarCollectorAs is cedarCollector granting each local user what
// claims returns.
func cedarCollectorAs(t testing.TB, c *Collector, claims func(user string) *auth.Claims) (string, *cedar.Server) {
	t.Helper()
	srv := cedar.NewServer(cedar.Options{
		Methods: []cedar.Method{&cedar.FS{Domain: "test", Grant: func(uid uint32, name string) *auth.Claims {
			return claims(name)
		}}},
		Commands: CedarCommands(CedarOptions{Current: func() *Collector { return c }, Name: "cm",
			Address: func() string { return "127.0.0.1:9618" }}),
		Timeout: 20 * time.Second,
	})
	addr := cedartest.Serve(t, srv)
	return addr, srv
}

// htcondorClient runs a Python program with the htcondor wheel; the
// program finds the collector's address in ADDR and prints JSON.
func htcondorClient(t testing.TB, addr, params, program string) (string, error) {
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

// TestCedarPolicies drives the client through each security setting: what
// the server requires (authentication, integrity, encryption) passes, what
// it refuses (CLAIMTOBE, NEVER, an identity without READ) fails without a
// session or an answer.
func TestCedarPolicies(t *testing.T) {
	query := `print(len(htcondor2.Collector(ADDR).query(htcondor2.AdType.Startd)))`
	tests := []struct {
		name   string
		params string
		grant  []auth.Scope
		ok     bool
	}{
		{"encryption required", "htcondor2.param['SEC_CLIENT_ENCRYPTION'] = 'REQUIRED'", []auth.Scope{auth.Read}, true},
		{"integrity only", "htcondor2.param['SEC_CLIENT_ENCRYPTION'] = 'OPTIONAL'\nhtcondor2.param['SEC_CLIENT_INTEGRITY'] = 'REQUIRED'", []auth.Scope{auth.Read}, true},
		{"administrator", "", []auth.Scope{auth.Administrator}, true},
		{"claimtobe", "htcondor2.param['SEC_CLIENT_AUTHENTICATION_METHODS'] = 'CLAIMTOBE'", []auth.Scope{auth.Read}, false},
		{"authentication never", "htcondor2.param['SEC_CLIENT_AUTHENTICATION'] = 'NEVER'", []auth.Scope{auth.Read}, false},
		{"encryption never", "htcondor2.param['SEC_CLIENT_ENCRYPTION'] = 'NEVER'\nhtcondor2.param['SEC_CLIENT_INTEGRITY'] = 'NEVER'", []auth.Scope{auth.Read}, false},
		{"no grant", "", nil, false},
		{"sea read only", "", []auth.Scope{auth.SeaRead}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := seedCollector(t)
			addr, srv := cedarCollector(t, c, tt.grant)
			out, err := htcondorClient(t, addr, tt.params, query)
			if tt.ok {
				if err != nil || !strings.HasSuffix(strings.TrimSpace(out), "2") {
					t.Fatalf("refused: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("answered: %s", out)
			}
			if tt.grant == nil || tt.name == "sea read only" {
				return // authenticated, then denied: the session exists
			}
			if n := srv.Sessions(); n != 0 {
				t.Errorf("%d sessions after a refused handshake", n)
			}
		})
	}
}

// TestCedarBadPackets sends malformed packets and checks that the server
// closes the connection and goes on serving.
func TestCedarBadPackets(t *testing.T) {
	c := seedCollector(t)
	addr, _ := cedarCollector(t, c, []auth.Scope{auth.Read})
	for name, raw := range map[string][]byte{
		"2 GiB length":           {1, 0x80, 0, 0, 0},
		"truncated":              {1, 0, 0, 0, 50, 1, 2},
		"bad end flag":           {9, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0},
		"command without auth":   {1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 5},
		"forged attribute count": append([]byte{1, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0xea, 0x6a}, 0x7f, 0, 0, 0, 0, 0, 0, 0),
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write(raw)
		conn.(*net.TCPConn).CloseWrite()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(conn)
		conn.Close()
		if errors.Is(err, syscall.ECONNRESET) {
			err = nil // closed with the rest unread
		}
		if err != nil || len(got) != 0 {
			t.Errorf("%s: answered %q, %v; want the connection closed", name, got, err)
		}
	}
	if out, err := htcondorClient(t, addr, "", `print(len(htcondor2.Collector(ADDR).query(htcondor2.AdType.Startd)))`); err != nil {
		t.Fatalf("after the bad packets: %v\n%s", err, out)
	}
}
