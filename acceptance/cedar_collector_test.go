package acceptance

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

const cedarCollectorPool = `
pool "cedarc" {
  nodes  = 1
  slots  = 2
  config = { UPDATE_INTERVAL = "2", NEGOTIATOR_INTERVAL = "2" }
}

output "condor_host" {
  value = pool.cedarc.condor_host
}

output "cm" {
  value = pool.cedarc.central_manager
}
`

// htcondorCLI runs HTCondor's `htcondor` command-line tool from the wheel
// (the htcondor_cli package, which ships without a console script) with
// env: COLLECTOR_HOST and FS authentication, or a CONDOR_CONFIG.
func htcondorCLI(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("python3", append([]string{"-c",
		"import sys; from htcondor_cli.cli import main; sys.argv[0] = 'htcondor'; main()"}, args...)...)
	cmd.Env = append(append(os.Environ(), "HOME="+t.TempDir(), "NO_COLOR=1"), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestCEDARCollectorClients drives a pond pool with HTCondor's own tools at
// the pool's condor_host: the `htcondor` CLI's collector-side commands
// (ep status, cm status), htcondor2.Collector.query of each ad type,
// locate of the collector; and checks that an advertisement from an
// identity that holds only READ (any local user proven by FS) is refused
// with nothing stored, that an unauthenticated update is dropped, and that
// the agent goes on serving.
func TestCEDARCollectorClients(t *testing.T) {
	t.Parallel()
	if exec.Command("python3", "-c", "import htcondor2, htcondor_cli").Run() != nil {
		testenv.SkipOrFail(t, "the htcondor Python wheel is not installed")
	}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", cedarCollectorPool)
	w.expect(0, "apply", "-auto-approve")
	host := w.output("condor_host")
	if cm := w.output("cm"); host != cm {
		t.Fatalf("condor_host %q is not the central manager %q", host, cm)
	}

	// Wait for the slots and the negotiator's first ad.
	var types map[string]int
	var machine string
	eventually(t, 60*time.Second, func() error {
		out, err := htcondor(t, host, "FS", `
coll = htcondor2.Collector(ADDR)
counts = {t.name: len(coll.query(t)) for t in (htcondor2.AdType.Startd, htcondor2.AdType.Schedd,
  htcondor2.AdType.Negotiator, htcondor2.AdType.Collector, htcondor2.AdType.StartDaemon, htcondor2.AdType.Master)}
slots = coll.query(htcondor2.AdType.Startd, projection=['Machine'])
print(json.dumps({'counts': counts, 'machine': slots[0]['Machine'] if slots else ''}))
`)
		if err != nil {
			return err
		}
		var got struct {
			Counts  map[string]int `json:"counts"`
			Machine string         `json:"machine"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		types, machine = got.Counts, got.Machine
		if types["Startd"] != 2 || types["Negotiator"] != 1 {
			return fmt.Errorf("ads by type %v, want 2 slots and the negotiator", types)
		}
		return nil
	})
	if types["Schedd"] != 1 || types["Collector"] != 1 || types["StartDaemon"] != 1 {
		t.Errorf("ads by type %v, want one schedd, one collector, one startd", types)
	}

	out, err := htcondor(t, host, "FS", `
coll = htcondor2.Collector(ADDR)
loc = coll.locate(htcondor2.DaemonType.Collector)
anys = coll.query(htcondor2.AdType.Any, constraint='MyType == "Collector" || MyType == "Negotiator"', projection=['MyType', 'Name'])
print(json.dumps({'loc': loc['MyAddress'], 'name': loc['Name'], 'any': sorted(a['MyType'] for a in anys)}))
`)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Loc  string   `json:"loc"`
		Name string   `json:"name"`
		Any  []string `json:"any"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Loc != "<"+host+">" || got.Name != machine {
		t.Errorf("locate(Collector) = %s %q, want <%s> named %q", got.Loc, got.Name, host, machine)
	}
	if strings.Join(got.Any, ",") != "Collector,Negotiator" {
		t.Errorf("any query = %v", got.Any)
	}

	// The htcondor tool's collector-side commands, configured by hand and
	// by pondctl condor client-config.
	byHand := []string{"_CONDOR_COLLECTOR_HOST=" + host, "_CONDOR_SEC_CLIENT_AUTHENTICATION_METHODS=FS"}
	out, err = htcondorCLI(t, byHand, "ep", "status", machine)
	if err != nil || !strings.Contains(out, "Total slots: 2") || strings.Count(out, "@"+machine) != 2 {
		t.Errorf("htcondor ep status %s: %v\n%s", machine, err, out)
	}
	t.Logf("htcondor ep status %s:\n%s", machine, out)
	out, err = htcondorCLI(t, byHand, "cm", "status")
	if err != nil || !strings.Contains(out, "Central Manager") || !strings.Contains(out, machine) {
		t.Errorf("htcondor cm status: %v\n%s", err, out)
	}
	t.Logf("htcondor cm status:\n%s", out)
	ccDir := filepath.Join(t.TempDir(), "client")
	w.expect(0, "condor", "client-config", "-pool", host, "-dir", ccDir)
	cfgFile := filepath.Join(ccDir, "condor_config")
	if cfg, err := os.ReadFile(cfgFile); err != nil || !strings.Contains(string(cfg), "\nCONDOR_HOST = "+host+"\n") {
		t.Errorf("client-config: %v\n%s", err, cfg)
	}
	out, err = htcondorCLI(t, []string{"CONDOR_CONFIG=" + cfgFile}, "ep", "status", machine)
	if err != nil || !strings.Contains(out, "Total slots: 2") {
		t.Errorf("htcondor ep status with CONDOR_CONFIG from client-config: %v\n%s", err, out)
	}

	// Any local user proven by FS may read, not advertise: the client is
	// told, and nothing is stored.
	if out, err := htcondor(t, host, "FS", `
from htcondor2 import classad
htcondor2.Collector(ADDR).advertise([classad.ClassAd({'MyType': 'Widget', 'Name': 'w1'})])
print('advertised')`); err == nil {
		t.Errorf("an FS identity advertised: %s", out)
	}
	if out, err := htcondor(t, host, "FS", `
from htcondor2 import classad
htcondor2.Collector(ADDR).advertise([classad.ClassAd({'Name': 'slot9@`+machine+`', 'Machine': '`+machine+`'})], 'UPDATE_STARTD_AD')
print('advertised')`); err == nil {
		t.Errorf("an FS identity advertised a slot: %s", out)
	}
	// An update without DC_AUTHENTICATE: UPDATE_STARTD_AD (0) and an ad.
	c, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	payload := append(make([]byte, 8), []byte("\x00\x00\x00\x00\x00\x00\x00\x01Name = \"slot8@x\"\x00Machine\x00\x00")...)
	_, _ = c.Write(append([]byte{1, 0, 0, 0, byte(len(payload))}, payload...))
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	if n, err := io.ReadAll(c); len(n) != 0 {
		t.Errorf("an unauthenticated update was answered %q, %v", n, err)
	}
	c.Close()

	out, err = htcondor(t, host, "FS", `
coll = htcondor2.Collector(ADDR)
print(json.dumps(sorted(a['Name'] for a in coll.query(htcondor2.AdType.Any, constraint='MyType == "Widget" || MyType == "Machine"', projection=['Name']))))`)
	if err != nil {
		t.Fatalf("after the refused updates: %v", err)
	}
	var left []string
	if err := json.Unmarshal([]byte(out), &left); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(left) != 2 {
		t.Errorf("ads after the refused updates = %v, want the 2 slots only", left)
	}
	if r := w.expect(0, "condor", "status", "-pool", host, "-af", "Name"); strings.Count(r.stdout, "@") != 2 {
		t.Errorf("the API after the refused updates: %s", r)
	}
}
