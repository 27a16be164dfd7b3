package startd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/testenv"
)

func TestParseUIDRange(t *testing.T) {
	tests := []struct {
		spec   string
		lo, hi uint32
		err    string
	}{
		{"60600-61183", 60600, 61183, ""},
		{" 70000 - 70000 ", 70000, 70000, ""},
		{"60600", 0, 0, "not a range"},
		{"a-b", 0, 0, "not a range"},
		{"0-10", 0, 0, "must start above 0"},
		{"20-10", 0, 0, "must start above 0"},
		{"2147483000-2147483647", 0, 0, "not safe"},
	}
	for _, tt := range tests {
		lo, hi, err := parseUIDRange(tt.spec)
		if tt.err == "" && (err != nil || lo != tt.lo || hi != tt.hi) || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("parseUIDRange(%q) = %d, %d, %v; want %d, %d, %q", tt.spec, lo, hi, err, tt.lo, tt.hi, tt.err)
		}
	}
}

func rootOnly(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "slot users are for a startd that runs as root")
}

func slotConfig(t *testing.T, knobs map[string]string) *config.Config {
	t.Helper()
	cfg := config.New(config.Options{})
	for k, v := range knobs {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// TestSlotUsersAreDistinct hands out every uid of a small range, from two
// slotUsers as two startds on one machine would have: no uid is handed out
// twice while held, and one released is handed out again.
func TestSlotUsersAreDistinct(t *testing.T) {
	a, b, dyn := twoSlotUsers(t, "61170-61173")
	seen := map[uint32]bool{}
	var held []*jobUser
	for i := range 4 {
		u := a
		if i%2 == 1 {
			u = b
		}
		ju, err := u.acquire(dyn)
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if seen[ju.cred.Uid] || ju.cred.Uid < 61170 || ju.cred.Uid > 61173 || ju.cred.Gid != ju.cred.Uid {
			t.Fatalf("job %d got uid %d gid %d (held: %v)", i, ju.cred.Uid, ju.cred.Gid, seen)
		}
		seen[ju.cred.Uid] = true
		held = append(held, ju)
	}
	if _, err := b.acquire(dyn); err == nil || !strings.Contains(err.Error(), "every uid of STARTER_SLOT_UIDS (4 of them) runs a job") {
		t.Fatalf("a fifth job: %v", err)
	}
	held[2].release()
	ju, err := a.acquire(dyn)
	if err != nil || ju.cred.Uid != held[2].cred.Uid {
		t.Fatalf("after a release: %v, %v; want uid %d", ju, err, held[2].cred.Uid)
	}
	held[2] = ju
	for _, ju := range held {
		ju.release()
	}
}

func TestSlotUserKnobs(t *testing.T) {
	rootOnly(t)
	static := []*slot{{id: 1}, {id: 2}}
	tests := []struct {
		name  string
		knobs map[string]string
		slots []*slot
		err   string
	}{
		{"SLOT1_USER", map[string]string{"SLOT1_USER": "nobody"}, static, ""},
		{"no such account", map[string]string{"SLOT2_USER": "no-such-user-pond"}, static, `SLOT2_USER: user "no-such-user-pond" has no account on this machine`},
		{"root", map[string]string{"SLOT1_USER": "root"}, static, "SLOT1_USER: jobs do not run as root"},
		{"one user for two slots", map[string]string{"SLOT1_USER": "nobody", "SLOT2_USER": "nobody"}, static, "needs a user of its own"},
		{"partitionable", map[string]string{"SLOT1_USER": "nobody"}, []*slot{{id: 1, partitionable: true}}, "SLOT1_USER: slot 1 is partitionable"},
		{"bad range", map[string]string{"STARTER_SLOT_UIDS": "lots"}, static, "STARTER_SLOT_UIDS: \"lots\" is not a range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := newSlotUsers(slotConfig(t, tt.knobs), tt.slots)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ju, err := u.acquire(static[0])
			if err != nil {
				t.Fatal(err)
			}
			defer ju.release()
			if ju.cred.Uid != 65534 {
				t.Errorf("slot 1 runs jobs as uid %d, want nobody's", ju.cred.Uid)
			}
		})
	}
}

// TestReleaseKillsWhatTheJobLeft: a process a job left behind (out of its
// process group) does not outlive the release of its uid.
func TestReleaseKillsWhatTheJobLeft(t *testing.T) {
	rootOnly(t)
	u, err := newSlotUsers(slotConfig(t, map[string]string{"STARTER_SLOT_UIDS": "61175-61175"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	ju, err := u.acquire(&slot{id: 1, sub: 1, parent: &slot{id: 1}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: ju.cred}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	ju.release()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the job's leftover process still runs after its uid was released")
	}
}

// BenchmarkSlotUserCycle measures what a slot user costs a job: taking a
// uid, the search for what the job left when it ends (none after a job
// whose supervisor was the first process of a PID namespace), and freeing
// it.
func BenchmarkSlotUserCycle(b *testing.B) {
	testenv.NeedRoot(b, "slot users are for a startd that runs as root")
	cfg := config.New(config.Options{})
	if err := cfg.Set("STARTER_SLOT_UIDS", "61176-61179"); err != nil {
		b.Fatal(err)
	}
	u, err := newSlotUsers(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	dyn := &slot{id: 1, sub: 1, parent: &slot{id: 1}}
	for _, pidNS := range []bool{false, true} {
		b.Run(fmt.Sprintf("pid-namespace=%v", pidNS), func(b *testing.B) {
			for b.Loop() {
				ju, err := u.acquire(dyn)
				if err != nil {
					b.Fatal(err)
				}
				if ju.leftNothing(pidNS) {
					ju.free()
				} else {
					ju.release()
				}
			}
		})
	}
}

// TestSlotUserJobLeavesNothing runs, as a slot user, jobs that leave a
// process out of their process group and session (setsid after a double
// fork), under a supervisor isolated as the startd isolates them and under
// one without namespaces: once the job has ended and its uid is free again,
// the way the startd frees it, no process runs as that uid.
func TestSlotUserJobLeavesNothing(t *testing.T) {
	rootOnly(t)
	u, err := newSlotUsers(slotConfig(t, map[string]string{"STARTER_SLOT_UIDS": "61170-61171"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	isos := map[string]isolation{"subreaper": {}}
	if iso := testIsolation(t); iso.pidNS {
		isos["namespaces"] = iso
	} else {
		testenv.SkipOrFailf(t, "no namespaces here: %s", iso.why)
	}
	for name, iso := range isos {
		t.Run(name, func(t *testing.T) {
			ju, err := u.acquire(&slot{id: 1, sub: 1, parent: &slot{id: 1}})
			if err != nil {
				t.Fatal(err)
			}
			base, err := os.MkdirTemp("", "leftover")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(base) })
			dir := filepath.Join(base, "dir_slot1_1")
			mustNil(t, os.Chmod(base, 0o711), os.Mkdir(dir, 0o700), os.Chown(dir, int(ju.cred.Uid), int(ju.cred.Gid)))
			spec := escapee(dir, false)
			spec.Credential = ju.cred
			if spec.Mounts, err = scratchMounts(dir, iso.mounts); err != nil {
				t.Fatal(err)
			}
			null, _ := os.Open(os.DevNull)
			defer null.Close()
			p, err := startSupervisor(iso, spec, null, null, null)
			if err != nil {
				t.Fatal(err)
			}
			eventuallyTrue(t, 5*time.Second, func() bool {
				_, err := os.Stat(filepath.Join(dir, "beat"))
				return err == nil
			})
			p.wait()
			if ju.leftNothing(p.pidNS) {
				ju.free()
			} else {
				ju.release()
			}
			if pids := uidProcesses(ju.cred.Uid); len(pids) > 0 {
				killUID(ju.cred.Uid)
				t.Fatalf("processes %v run as the job's uid %d after it was freed", pids, ju.cred.Uid)
			}
			assertNoHeartbeat(t, filepath.Join(dir, "beat"))
		})
	}
}

// TestSlotUsersTakeTheirFreedFirst: a startd hands its next job the uid
// its own last job freed rather than the lowest free one, and a uid it
// freed that another startd took meanwhile is passed over.
func TestSlotUsersTakeTheirFreedFirst(t *testing.T) {
	a, b, dyn := twoSlotUsers(t, "61175-61178")
	held := map[uint32]*jobUser{}
	take := func(u *slotUsers, want uint32) {
		t.Helper()
		ju, err := u.acquire(dyn)
		if err != nil || ju.cred.Uid != want {
			t.Fatalf("acquire = %+v, %v; want uid %d", ju, err, want)
		}
		held[want] = ju
	}
	free := func(uid uint32) {
		held[uid].release()
		delete(held, uid)
	}
	t.Cleanup(func() {
		for _, ju := range held {
			ju.release()
		}
	})
	take(a, 61175)
	take(a, 61176)
	take(b, 61177)
	take(b, 61178)
	free(61178) // b's
	free(61176) // a's: now the lowest free
	take(b, 61178)
	take(a, 61176)
	free(61177) // b's, then taken by a
	take(a, 61177)
	if ju, err := b.acquire(dyn); err == nil {
		held[ju.cred.Uid] = ju
		t.Fatalf("b took uid %d, which a holds", ju.cred.Uid)
	}
}

// twoSlotUsers returns the slot users of two startds of one machine with
// STARTER_SLOT_UIDS uids, and a dynamic slot to acquire them for; the
// test needs root.
func twoSlotUsers(t *testing.T, uids string) (a, b *slotUsers, dyn *slot) {
	t.Helper()
	rootOnly(t)
	cfg := slotConfig(t, map[string]string{"STARTER_SLOT_UIDS": uids})
	sl := &slot{id: 1, partitionable: true}
	var err error
	if a, err = newSlotUsers(cfg, []*slot{sl}); err != nil {
		t.Fatal(err)
	}
	if b, err = newSlotUsers(cfg, []*slot{sl}); err != nil {
		t.Fatal(err)
	}
	return a, b, &slot{id: 1, sub: 1, parent: sl}
}
