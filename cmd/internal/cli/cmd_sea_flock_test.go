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

// TestSeaFlock runs the central managers of two pools in one sea, sets a
// flock from busy to spare, and shows busy's willing list with `pondctl
// sea flock`, as a table and with -json.
func TestSeaFlock(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var agents []*agent.Agent
	done := make(chan struct{}, 2)
	defer func() {
		cancel()
		for range agents {
			<-done
		}
	}()
	for _, pool := range []string{"busy", "spare"} {
		cfg := &agent.Config{Name: pool + "-0", Role: "cm", Pool: pool, Bind: "127.0.0.1:0", API: "127.0.0.1:0", GossipProfile: "fast",
			DataDir: filepath.Join(dir, pool), InsecureAPI: true, Knobs: map[string]string{"POND_FLOCK_INTERVAL": "200ms", "POND_FLOCK_TTL": "2s"}}
		if len(agents) > 0 {
			cfg.Join = []string{agents[0].Sea().GossipAddr()}
		}
		a, err := agent.New(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		go func() { a.Run(ctx); done <- struct{}{} }()
	}
	busy, spare := agents[0], agents[1]
	if _, err := api.NewClient(busy.APIAddr()).SetFlock(ctx, api.FlockConfig{Name: "flock.overflow", Out: &api.FlockOut{To: []string{spare.APIAddr()}}}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), append([]string{"-chdir=" + dir, "sea", "flock", "-sea", busy.APIAddr()}, args...),
			strings.NewReader(""), &out, &errOut, []string{"HOME=" + dir})
		return code, out.String(), errOut.String()
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errOut := run()
		if code == 0 && strings.Contains(out, "Willing pool") && strings.Contains(out, spare.APIAddr()) && strings.Contains(out, "flock.overflow") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("table: exit %d\n%s%s", code, out, errOut)
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, out, _ := run("-json")
	var st api.FlockStatus
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Willing) != 1 || st.Willing[0].Pool != "spare" {
		t.Fatalf("-json: exit %d, %s", code, out)
	}
	var errOut bytes.Buffer
	if code := Run(t.Context(), []string{"-chdir=" + dir, "sea", "flock", "-sea", "127.0.0.1:1"}, strings.NewReader(""), new(bytes.Buffer), &errOut,
		[]string{"HOME=" + dir}); code != 1 || !strings.Contains(errOut.String(), "Cannot read the flocking") {
		t.Errorf("an address nobody answers: exit %d, %s", code, errOut.String())
	}
}
