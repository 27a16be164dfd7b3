package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/api"
)

// TestSeaFailover shows the fail-over state of a central manager that
// keeps replicas, as a table and with -json, and refuses an agent whose
// pool keeps none.
func TestSeaFailover(t *testing.T) {
	dir := t.TempDir()
	start := func(name string, knobs map[string]string) *agent.Agent {
		ctx, cancel := context.WithCancel(context.Background())
		a, err := agent.New(ctx, &agent.Config{Name: name, Role: "cm", Pool: name, Bind: "127.0.0.1:0", API: "127.0.0.1:0",
			GossipProfile: "fast", DataDir: filepath.Join(dir, name), InsecureAPI: true, Knobs: knobs}, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { a.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return a
	}
	cm := start("campus", map[string]string{"POND_CM_REPLICAS": "1"})
	plain := start("plain", nil)
	run := func(addr string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), append([]string{"-chdir=" + dir, "sea", "failover", "-sea", addr}, args...),
			strings.NewReader(""), &out, &errOut, []string{"HOME=" + dir})
		return code, out.String(), errOut.String()
	}
	var st api.FailoverStatus
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errOut := run(cm.APIAddr(), "-json")
		st = api.FailoverStatus{}
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.Acting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("-json: exit %d, %s %s: the manager does not act", code, out, errOut)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Pool != "campus" || st.Epoch != 1 || st.Replicas != 1 || st.ManagerAPI != cm.APIAddr() || st.State == nil || st.State.Epoch != 1 {
		t.Errorf("-json: %+v", st)
	}
	if code, out, errOut := run(cm.APIAddr()); code != 0 || !strings.Contains(out, "campus (this node)") || !strings.Contains(out, "Epoch") {
		t.Errorf("table: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := run(plain.APIAddr()); code != 1 || !strings.Contains(errOut, "pool with replicas") {
		t.Errorf("an agent without fail-over: exit %d, %s", code, errOut)
	}
}
