package acceptance

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestRelaySquattedPort kills the central manager of a pool whose worker
// it relays for and, before apply starts it again, binds the worker's
// relayed API port, as any user of the host could: the restarted relay
// gives the worker other ports, and apply, which finds a stranger at the
// worker's old address (it cannot prove it is the worker, whose
// certificate it knows), moves on to the worker's new address instead of
// waiting for the stranger until it gives up.
func TestRelaySquattedPort(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", relayPool+`
output "nodes" {
  value = pool.hub.node_details
}
`)
	w.expect(0, "apply", "-auto-approve")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	cm := w.output("cm")
	expectRelayed(t, w, cm, "hub-0", "hub-1")
	apiOf := func() string {
		for _, d := range w.outputs()["nodes"].([]any) {
			if m := d.(map[string]any); m["name"] == "hub-1" {
				return m["api"].(string)
			}
		}
		t.Fatal("no hub-1 in the outputs")
		return ""
	}
	old := apiOf()

	killNode(t, w, "hub-0")
	var ln net.Listener
	eventually(t, 10*time.Second, func() error {
		var err error
		ln, err = net.Listen("tcp", old)
		return err
	})
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// A stranger: it says something that is not TLS.
			_, _ = c.Write([]byte("SSH-2.0-squatter\r\n"))
			go func() { time.Sleep(time.Minute); c.Close() }()
		}
	}()

	start := time.Now()
	r := w.run("apply", "-auto-approve")
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("apply with the worker's old port taken failed after %s:\n%s", took.Round(time.Millisecond), r)
	}
	if took > 20*time.Second {
		t.Errorf("apply took %s with the worker's old port taken", took.Round(time.Millisecond))
	}
	if now := apiOf(); now == old || strings.TrimSpace(now) == "" {
		t.Errorf("hub-1's api is %q after apply, was %q (taken)", now, old)
	}
	eventually(t, 15*time.Second, func() error {
		reach, _ := seaMembersReach(t, w, cm)
		if reach["hub-1"] != (memberReach{Reach: "reverse", Relay: "hub-0"}) {
			return &relayErr{reach}
		}
		return nil
	})
}

type relayErr struct{ reach map[string]memberReach }

func (e *relayErr) Error() string { return "reach " + fmtReach(e.reach) }

func fmtReach(m map[string]memberReach) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k + "=" + v.Reach + "/" + v.Relay + " ")
	}
	return b.String()
}
