package acceptance

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestUnreachableSeaFailsThePlan configures a sea address nothing answers
// at: plan and apply fail at once, at the address argument, saying what
// was tried and why it failed, and start no agent. A plan saved while the
// sea answered, applied once it is gone, fails without leaving an agent
// running either.
func TestUnreachableSeaFailsThePlan(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", fmt.Sprintf(`pond {
  sea {
    address = %q
  }
}

pool "workers" {
  nodes = 1
}
`, addr))
	for _, cmd := range [][]string{{"plan"}, {"apply", "-auto-approve"}} {
		start := time.Now()
		r := w.expect(1, cmd...)
		if took := time.Since(start); took > 15*time.Second {
			t.Errorf("%s took %v to find the sea unreachable", cmd[0], took)
		}
		for _, want := range []string{
			"Error: Sea unreachable",
			"main.pond.hcl line 3",
			fmt.Sprintf("3:     address = %q", addr),
			fmt.Sprintf("asked the agent at %s who it is (GET /v1/self", addr),
			"connection refused",
		} {
			if !strings.Contains(r.stderr, want) {
				t.Fatalf("%s: %q missing from:\n%s", cmd[0], want, r)
			}
		}
		if !caretsUnder(r.stderr, "3:     address = ", `"`) {
			t.Fatalf("%s: the error does not point at the address's value:\n%s", cmd[0], r.stderr)
		}
		if pids := agentPIDs(w.dir); len(pids) != 0 {
			t.Fatalf("%s left %d agent(s) running", cmd[0], len(pids))
		}
	}

	// A sea that answers the plan's probe, then goes away before the
	// pool's nodes would join it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer l.Close()
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Read(make([]byte, 4096))
		_, _ = c.Write([]byte("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
	}()
	b := newWorkdir(t, "")
	b.write("main.pond.hcl", fmt.Sprintf("pond {\n  sea { address = %q }\n}\npool \"late\" {\n  nodes = 2\n}\n", l.Addr()))
	start := time.Now()
	r := b.expect(1, "apply", "-auto-approve")
	if !strings.Contains(r.stderr, fmt.Sprintf("the sea at %s does not answer, so no node of pool late was started", l.Addr())) {
		t.Fatalf("apply once the sea went away:\n%s", r)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the apply took %v to find the sea gone", took)
	}
	if pids := agentPIDs(b.dir); len(pids) != 0 {
		t.Fatalf("the failed apply left %d agent(s) running", len(pids))
	}
}

// caretsUnder reports whether, in a diagnostic's snippet, the line that
// holds snippet is followed by a line whose first caret stands under the
// first at after snippet: the diagnostic's range starts there.
func caretsUnder(out, snippet, at string) bool {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		j := strings.Index(l, snippet)
		if j < 0 || i+1 == len(lines) {
			continue
		}
		k := strings.Index(l[j+len(snippet):], at)
		return k >= 0 && strings.Index(lines[i+1], "^") == j+len(snippet)+k
	}
	return false
}
