package glidein

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

// Environment of the apply child.
const (
	childWorkDir = "POND_TEST_WORKDIR"
	childSiteDir = "POND_TEST_SITE_DIR"
	childSiteTag = "POND_TEST_SITE_TAG"
	childCM      = "POND_TEST_CM"
	childNodes   = "POND_TEST_NODES"
)

const crashAddr = "glidein.crash"

// applyChild is a pondctl applying glidein.crash with $POND_TEST_NODES
// glideins to the process site of $POND_TEST_SITE_DIR, killed by its
// parent at a random point. It says "apply" on its standard output just
// before it calls ApplyResourceChange.
func applyChild() int {
	os.Setenv(roleEnv, roleIdle)
	s := &procSite{dir: os.Getenv(childSiteDir), tag: os.Getenv(childSiteTag), role: roleIdle}
	n, _ := strconv.Atoi(os.Getenv(childNodes))
	ctx := context.Background()
	t := &testing.T{}
	p := siteFactory(s)().(*Provider)
	if err := providers.Err(p.Configure(ctx, providers.ConfigureRequest{Config: providerConfig(t, nil), WorkDir: os.Getenv(childWorkDir)}).Diagnostics); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := glideinConfig(t, map[string]cty.Value{"pool": cty.StringVal(os.Getenv(childCM)), "nodes": cty.NumberIntVal(int64(n))})
	prior := cty.NullVal(cfg.Type())
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: ResourceType, Address: crashAddr, Prior: prior, Config: cfg, ProposedNew: cfg})
	if err := providers.Err(plan.Diagnostics); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("apply")
	resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: ResourceType, Address: crashAddr, Prior: prior, Planned: plan.Planned, Config: cfg})
	if err := providers.Err(resp.Diagnostics); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("applied")
	time.Sleep(time.Hour)
	return 0
}

// killedApply runs applyChild for n glideins and kills it with SIGKILL
// after a random delay from the moment it starts applying. It reports
// whether the child had finished its apply by then.
func killedApply(t *testing.T, wd string, s *procSite, cm string, n int, delay time.Duration) bool {
	t.Helper()
	cmd := exec.Command(selfBinary(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+roleApply, childWorkDir+"="+wd, childSiteDir+"="+s.dir,
		childSiteTag+"="+s.tag, childCM+"="+cm, childNodes+"="+strconv.Itoa(n))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if !ok || l != "apply" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("apply child: %q %s", l, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("apply child did not start applying: %s", stderr.String())
	}
	time.Sleep(delay)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	for l := range lines {
		if l == "applied" {
			return true
		}
	}
	return false
}

// TestKillDuringApply kills a pondctl applying a glidein resource with
// SIGKILL at random points of its submissions, 20 times, with a count
// that changes from trial to trial and now and then a glidein killed
// behind pond's back. After each, an apply that has no state (the killed
// run wrote none) must leave exactly the count of glideins running: no ID
// running twice, no glidein running that the journal and the state do not
// account for, one per index.
func TestKillDuringApply(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 20 applies")
	}
	wd := t.TempDir()
	cm := startPool(t, wd)
	s := newSite(t, roleIdle)
	p := configured(t, wd, s, nil)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	var last cty.Value
	finished := 0
	everID := map[string]bool{}
	for trial := range 20 {
		n := 1 + rng.IntN(4)
		if trial%4 == 3 {
			if r := running(t, s); len(r) > 0 {
				victim := r[rng.IntN(len(r))]
				for _, pid := range s.procs()[victim] {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		delay := time.Duration(rng.IntN(60)) * time.Millisecond
		if killedApply(t, wd, s, cm, n, delay) {
			finished++
		}
		state, err := applyConfig(t, p, crashAddr, cty.NullVal(glideinSchema().ImpliedType()),
			glideinConfig(t, map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(int64(n))}), nil)
		if err != nil {
			t.Fatalf("trial %d (nodes %d, killed after %s): apply: %v", trial, n, delay, err)
		}
		last = state
		got := running(t, s)
		want := ids(state)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (nodes %d, killed after %s): running %v, state says %v", trial, n, delay, got, want)
		}
		if len(got) != n {
			t.Fatalf("trial %d: %d glideins running, want %d: %v", trial, len(got), n, got)
		}
		recs, err := p.journal.list(state.GetAttr("id").AsString())
		if err != nil {
			t.Fatal(err)
		}
		journaled := map[string]bool{}
		index := map[int]string{}
		for _, r := range recs {
			journaled[r.ID] = true
		}
		for _, id := range got {
			if !journaled[id] {
				t.Fatalf("trial %d: %s runs and the journal does not record it", trial, id)
			}
			i := indexOf(state.GetAttr("id").AsString(), id)
			if other, dup := index[i]; dup {
				t.Fatalf("trial %d: %s and %s both run as index %d", trial, id, other, i)
			}
			index[i] = id
			everID[id] = true
		}
	}
	t.Logf("%d of 20 killed applies had finished; %d glideins in all", finished, len(everID))
	destroyAll(t, p, crashAddr, last)
	if got := running(t, s); len(got) != 0 {
		t.Errorf("after destroy, still running: %v", got)
	}
}
