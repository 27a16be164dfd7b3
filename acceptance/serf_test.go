package acceptance

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// TestPlainSerfAgentJoinsTheSea has a real serf agent (Debian's serf
// package) join a sea of pond agents with the sea's key (the working
// directory's .pond/auth/gossip.key, which the local provider encrypts the
// sea with): it is listed as a member, queries still cover every pond
// agent and never reach it, and pond's commands work as before.
func TestPlainSerfAgentJoinsTheSea(t *testing.T) {
	t.Parallel()
	serfBin, err := exec.LookPath("serf")
	if err != nil {
		testenv.SkipOrFail(t, "serf is not installed (apt-get install serf); .ci/run installs it")
	}
	w := newWorkdir(t, "sea")
	w.expect(0, "apply", "-auto-approve")
	seaAPI := w.outputs()["sea"].(string)
	r := w.expect(0, "sea", "members", "-json", "-sea", seaAPI)
	gossip := gossipOf(t, r.stdout, seaAPI)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := strings.TrimSpace(readFile(t, filepath.Join(w.dir, ".pond", "auth", "gossip.key")))
	cmd := exec.CommandContext(ctx, serfBin, "agent", "-node", "plain-serf", "-bind", "127.0.0.1:0", "-rpc-addr", "127.0.0.1:0", "-encrypt", key, "-join", gossip)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	eventually(t, 30*time.Second, func() error {
		for _, m := range w.seaMembers(seaAPI) {
			if m.Name == "plain-serf" {
				return nil
			}
		}
		return fmt.Errorf("plain-serf not in the sea yet; serf said:\n%s", out.String())
	})
	r = w.expect(0, "sea", "query", "-sea", seaAPI, "-requirements", "true", "-k", "0", "-json")
	if strings.Contains(r.stdout, "plain-serf") {
		t.Fatalf("a plain serf agent was queried:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, `"completeness": 1`) {
		t.Fatalf("the query is incomplete with a plain serf agent in the sea:\n%s", r.stdout)
	}
	w.expect(0, "plan", "-detailed-exitcode")
	w.expect(0, "destroy", "-auto-approve")
}

// gossipOf finds the gossip address of the member whose API is api in
// sea members -json output.
func gossipOf(t *testing.T, js, api string) string {
	t.Helper()
	var ms []struct {
		Addr string            `json:"addr"`
		Port int               `json:"port"`
		Tags map[string]string `json:"tags"`
	}
	if err := json.Unmarshal([]byte(js), &ms); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Tags["api"] == api {
			return fmt.Sprintf("%s:%d", m.Addr, m.Port)
		}
	}
	t.Fatalf("no member serves %s", api)
	return ""
}
