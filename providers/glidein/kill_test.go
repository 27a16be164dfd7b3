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

	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

// Environment of the apply child.
const (
	childWorkDir  = "POND_TEST_WORKDIR"
	childSiteKind = "POND_TEST_SITE_KIND"
	childSiteDir  = "POND_TEST_SITE_DIR"
	childSiteTag  = "POND_TEST_SITE_TAG"
	childCM       = "POND_TEST_CM"
	childNodes    = "POND_TEST_NODES"
	// childDestroy set makes the apply child destroy what it applied,
	// saying "destroy" on its standard output first.
	childDestroy = "POND_TEST_DESTROY"
)

const crashAddr = "glidein.crash"

// applyChild is a pondctl applying glidein.crash with $POND_TEST_NODES
// glideins to the process site of $POND_TEST_SITE_DIR, killed by its
// parent at a random point. It says "apply" on its standard output just
// before it calls ApplyResourceChange.
func applyChild() int {
	os.Setenv(roleEnv, roleIdle)
	mk, ok := trialSites[os.Getenv(childSiteKind)]
	if !ok {
		fmt.Fprintf(os.Stderr, "no trial site %q\n", os.Getenv(childSiteKind))
		return 1
	}
	s, err := mk(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, _ := strconv.Atoi(os.Getenv(childNodes))
	ctx := context.Background()
	p := siteFactory(s)().(*Provider)
	if err := providers.Err(p.Configure(ctx, providers.ConfigureRequest{Config: providerConfig(nil), WorkDir: os.Getenv(childWorkDir)}).Diagnostics); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(os.Getenv(childCM)), "nodes": cty.NumberIntVal(int64(n))})
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
	if os.Getenv(childDestroy) != "" {
		fmt.Println("destroy")
		resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: ResourceType, Address: crashAddr,
			Prior: resp.New, Planned: cty.NullVal(resp.New.Type()), Config: cty.NullVal(resp.New.Type())})
		if err := providers.Err(resp.Diagnostics); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("destroyed")
	}
	time.Sleep(time.Hour)
	return 0
}

// trialSites make the sites the kill trials run against, by kind, from
// the environment the trial gives its apply child (trialSite.env). A
// Slurm or SSH site is added here with the environment that names its
// cluster or hosts.
var trialSites = map[string]func(getenv func(string) string) (site.Site, error){
	"process": func(getenv func(string) string) (site.Site, error) {
		return &procSite{dir: getenv(childSiteDir), tag: getenv(childSiteTag), role: roleIdle}, nil
	},
}

// trialSite is a site of the kill trials, as the test sees it.
type trialSite struct {
	site.Site
	// env is what the apply child needs to make the same site (with
	// childSiteKind).
	env []string
	// running, when not nil, returns the IDs of the glideins running on
	// the site's machines as seen there rather than by List (processes in
	// /proc, squeue), failing t for an ID that runs twice.
	running func(t testing.TB) []string
	// kill ends one running glidein behind pond's back.
	kill func(t testing.TB, id string)
}

func procTrialSite(s *procSite) trialSite {
	return trialSite{Site: s,
		env:     []string{childSiteKind + "=process", childSiteDir + "=" + s.dir, childSiteTag + "=" + s.tag},
		running: func(t testing.TB) []string { return running(t, s) },
		kill: func(t testing.TB, id string) {
			for _, pid := range s.procs()[id] {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		},
	}
}

// killedChild runs applyChild for n glideins (with childDestroy set when
// destroy is) and kills it with SIGKILL delay after it starts applying, or
// destroying. It reports whether the apply, or the destroy, had finished
// by then.
func killedChild(t *testing.T, wd string, s trialSite, cm string, n int, delay time.Duration, destroy bool) bool {
	t.Helper()
	env := []string{roleEnv + "=" + roleApply, childWorkDir + "=" + wd, childCM + "=" + cm, childNodes + "=" + strconv.Itoa(n)}
	start, done := "apply", "applied"
	if destroy {
		env = append(env, childDestroy+"=1")
		start, done = "destroy", "destroyed"
	}
	cmd := exec.Command(selfBinary(), "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), s.env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(60 * time.Second)
	for started := false; !started; {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("%s child ended before it started: %s", start, stderr.String())
			}
			started = l == start
		case <-timeout:
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%s child did not start: %s", start, stderr.String())
		}
	}
	time.Sleep(delay)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	for l := range lines {
		if l == done {
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
	t.Parallel()
	if testing.Short() {
		t.Skip("kills 20 applies")
	}
	wd := t.TempDir()
	cm := startPool(t, wd)
	killTrials(t, wd, cm, procTrialSite(newSite(t, roleIdle)), 20)
}

// killTrials runs the kill trials against s: a pool's central manager at
// cm, the working directory wd.
func killTrials(t *testing.T, wd, cm string, s trialSite, trials int) {
	p := configured(t, wd, s, nil)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	var last cty.Value
	finished := 0
	everID := map[string]bool{}
	for trial := range trials {
		n := 1 + rng.IntN(4)
		if trial%4 == 3 && last != cty.NilVal {
			if r := ids(last); len(r) > 0 {
				s.kill(t, r[rng.IntN(len(r))])
			}
		}
		delay := time.Duration(rng.IntN(60)) * time.Millisecond
		if killedChild(t, wd, s, cm, n, delay, false) {
			finished++
		}
		state, err := applyConfig(t, p, crashAddr, cty.NullVal(glideinSchema().ImpliedType()),
			glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(int64(n))}), nil)
		if err != nil {
			t.Fatalf("trial %d (nodes %d, killed after %s): apply: %v", trial, n, delay, err)
		}
		last = state
		prefix := state.GetAttr("id").AsString()
		want := ids(state)
		slices.Sort(want)
		// What the site lists: each ID once, exactly the state's.
		gs, err := s.List(context.Background(), prefix)
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, g := range gs {
			if slices.Contains(listed, g.ID) {
				t.Fatalf("trial %d: the site lists %s twice", trial, g.ID)
			}
			if !g.State.Ended() {
				listed = append(listed, g.ID)
			}
		}
		slices.Sort(listed)
		if !slices.Equal(listed, want) || len(want) != n {
			t.Fatalf("trial %d (nodes %d, killed after %s): the site lists %v live, state says %v", trial, n, delay, listed, want)
		}
		// What runs on the site's machines.
		if s.running != nil {
			if got := s.running(t); !slices.Equal(got, want) {
				t.Fatalf("trial %d (nodes %d, killed after %s): running %v, state says %v", trial, n, delay, got, want)
			}
		}
		recs, err := p.journal.list(prefix)
		if err != nil {
			t.Fatal(err)
		}
		journaled := map[string]bool{}
		for _, r := range recs {
			journaled[r.ID] = true
		}
		index := map[int]string{}
		for _, id := range want {
			if !journaled[id] {
				t.Fatalf("trial %d: %s runs and the journal does not record it", trial, id)
			}
			i := indexOf(prefix, id)
			if other, dup := index[i]; dup {
				t.Fatalf("trial %d: %s and %s both run as index %d", trial, id, other, i)
			}
			index[i] = id
			everID[id] = true
		}
	}
	t.Logf("%d of %d killed applies had finished; %d glideins in all", finished, trials, len(everID))
	destroyAll(t, p, crashAddr, last)
	if gs, err := s.List(context.Background(), last.GetAttr("id").AsString()); err != nil || anyLive(gs) {
		t.Errorf("after destroy, the site lists %v (%v)", gs, err)
	}
	if s.running != nil {
		if got := s.running(t); len(got) != 0 {
			t.Errorf("after destroy, still running: %v", got)
		}
	}
}
