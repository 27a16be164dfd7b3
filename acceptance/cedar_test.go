package acceptance

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

const cedarPool = `
pool "cedar" {
  nodes  = 1
  slots  = 2
  config = { UPDATE_INTERVAL = "2" }
}

output "cm" {
  value = pool.cedar.central_manager
}
`

// htcondor runs a Python program with HTCondor's own client library, the
// htcondor wheel, against the collector at addr (ADDR in the program), and
// returns the last line it prints.
func htcondor(t *testing.T, addr, methods, program string) (string, error) {
	t.Helper()
	src := "import htcondor2, json, os\n" +
		"htcondor2.param['SEC_CLIENT_AUTHENTICATION_METHODS'] = '" + methods + "'\n" +
		"ADDR = os.environ['ADDR']\n" + program
	cmd := exec.Command("python3", "-c", src)
	cmd.Env = append(os.Environ(), "ADDR="+addr, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, out)
	}
	return lines[len(lines)-1], nil
}

// TestCEDARCollectorQueries points HTCondor's own Python client at a pond
// agent's API address (CONDOR_HOST = the agent) and checks that its
// collector answers queries with constraints and projections and locates
// the schedd, over CEDAR with FS authentication on one port shared with
// the API; that CLAIMTOBE is refused; and that a truncated packet and a
// 2 GiB length prefix are refused while the agent keeps serving.
func TestCEDARCollectorQueries(t *testing.T) {
	t.Parallel()
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.SkipOrFail(t, "the htcondor Python wheel is not installed")
	}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", cedarPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")

	var slots []string
	eventually(t, 60*time.Second, func() error {
		out, err := htcondor(t, cm, "FS", `print(json.dumps(sorted(a['Name'] for a in htcondor2.Collector(ADDR).query(htcondor2.AdType.Startd))))`)
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(out), &slots); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		if len(slots) != 2 {
			return fmt.Errorf("slots = %v, want 2", slots)
		}
		return nil
	})

	out, err := htcondor(t, cm, "FS", `
coll = htcondor2.Collector(ADDR)
proj = coll.query(htcondor2.AdType.Startd, constraint='Name == "`+slots[1]+`"', projection=['Name', 'Cpus'])
none = coll.query(htcondor2.AdType.Startd, constraint='Cpus > 1000')
sched = coll.locate(htcondor2.DaemonType.Schedd)
print(json.dumps({'proj': [dict(a) for a in proj], 'none': len(none), 'schedd': sched.get('MyAddress', '')}))
`)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Proj   []map[string]any `json:"proj"`
		None   int              `json:"none"`
		Schedd string           `json:"schedd"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got.Proj) != 1 || got.Proj[0]["Name"] != slots[1] || len(got.Proj[0]) != 2 {
		t.Errorf("constraint and projection answered %v, want only %s with Name and Cpus", got.Proj, slots[1])
	}
	if got.None != 0 {
		t.Errorf("a constraint no slot meets answered %d ads", got.None)
	}
	if got.Schedd == "" {
		t.Errorf("locate(Schedd) found no MyAddress")
	}

	// CLAIMTOBE proves nothing: refused.
	if out, err := htcondor(t, cm, "CLAIMTOBE", `print(len(htcondor2.Collector(ADDR).query(htcondor2.AdType.Startd)))`); err == nil {
		t.Errorf("a CLAIMTOBE client was answered: %s", out)
	}

	// A truncated packet and a 2 GiB length prefix: the agent drops the
	// connection without reading further.
	for name, raw := range map[string][]byte{
		"truncated packet":  {1, 0, 0, 0, 100, 0, 0, 0},
		"2 GiB length":      {1, 0x80, 0, 0, 0, 0, 0, 0, 0},
		"unauthenticated 5": {1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 5},
	} {
		c, err := net.DialTimeout("tcp", cm, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(raw); err != nil {
			t.Fatal(err)
		}
		if name == "truncated packet" {
			c.(*net.TCPConn).CloseWrite()
		}
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
		n, err := io.ReadAll(c)
		c.Close()
		if err != nil || len(n) != 0 {
			t.Errorf("%s: answered %q, %v; want the connection closed", name, n, err)
		}
	}

	// The agent still serves CEDAR and its API.
	if _, err := htcondor(t, cm, "FS", `print(len(htcondor2.Collector(ADDR).query(htcondor2.AdType.Startd)))`); err != nil {
		t.Errorf("after the bad packets: %v", err)
	}
	if r := w.expect(0, "condor", "status", "-pool", cm, "-af", "Name"); strings.Count(r.stdout, "@") != 2 {
		t.Errorf("the API after the bad packets: %s", r)
	}
}
