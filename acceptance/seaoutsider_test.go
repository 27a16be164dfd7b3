package acceptance

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSerfWithoutKeyCannotJoinTheSea has a plain serf agent, as any user
// of the host could start, try to join the default sea (the local
// provider on loopback, no encrypt) without the sea's key: the sea gossips
// encrypted with the working directory's sea key, so the agent never
// becomes a member.
func TestSerfWithoutKeyCannotJoinTheSea(t *testing.T) {
	serfBin, err := exec.LookPath("serf")
	if err != nil {
		t.Skip("serf is not installed (apt-get install serf); .ci/run installs it")
	}
	w := newWorkdir(t, "sea")
	w.expect(0, "apply", "-auto-approve")
	seaAPI := w.outputs()["sea"].(string)
	gossip := gossipOf(t, w.expect(0, "sea", "members", "-json", "-sea", seaAPI).stdout, seaAPI)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, serfBin, "agent", "-node", "outsider", "-bind", "127.0.0.1:0", "-rpc-addr", "127.0.0.1:0",
		"-retry-join", gossip, "-retry-interval", "1s")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range w.seaMembers(seaAPI) {
			if m.Name == "outsider" {
				t.Fatalf("a serf agent without the sea's key joined the sea (status %s); serf said:\n%s", m.Status, out.String())
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	w.expect(0, "destroy", "-auto-approve")
}
