package acceptance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExamples runs every example through the whole life cycle a user
// goes through: validate, plan, apply, a no-op plan, an agent killed behind
// pond's back and recreated, destroy.
func TestExamples(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		example string
		outputs []string
	}{
		{"local", []string{"central_manager", "sea", "members"}},
		{"sites", []string{"central_managers", "burst_members"}},
		{"sea", []string{"sea", "free_nodes"}},
	} {
		t.Run(tt.example, func(t *testing.T) {
			w := newWorkdir(t, tt.example)
			w.expect(0, "init")
			w.expect(0, "validate")
			r := w.expect(2, "plan", "-detailed-exitcode")
			if !strings.Contains(r.stdout, "to add, 0 to change, 0 to destroy.") {
				t.Fatalf("plan summary missing:\n%s", r.stdout)
			}
			r = w.expect(0, "apply", "-auto-approve")
			if !strings.Contains(r.stdout, "Creation complete after") || !strings.Contains(r.stdout, "Apply complete!") {
				t.Fatalf("apply progress missing:\n%s", r.stdout)
			}
			outs := w.outputs()
			for _, name := range tt.outputs {
				if outs[name] == nil {
					t.Fatalf("output %q missing after apply: %v", name, outs)
				}
			}
			w.expect(0, "plan", "-detailed-exitcode")

			pids := agentPIDs(w.dir)
			if len(pids) == 0 {
				t.Fatal("no agent processes after apply")
			}
			victim := pids[len(pids)/2]
			if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, func() error {
				if !isZombie(victim) {
					return fmt.Errorf("agent %d still running after SIGKILL", victim)
				}
				return nil
			})
			r = w.expect(2, "plan", "-detailed-exitcode")
			if !strings.Contains(r.stdout, "has changed") || !strings.Contains(r.stdout, "will be updated in-place") {
				t.Fatalf("plan after killing an agent does not show the drift and its repair:\n%s", r.stdout)
			}
			w.expect(0, "apply", "-auto-approve")
			if got := len(agentPIDs(w.dir)); got != len(pids) {
				t.Fatalf("%d agents after repair, want %d", got, len(pids))
			}
			w.expect(0, "plan", "-detailed-exitcode")

			r = w.expect(0, "destroy", "-auto-approve")
			if !strings.Contains(r.stdout, "Destroy complete!") {
				t.Fatalf("destroy summary missing:\n%s", r.stdout)
			}
			if pids := agentPIDs(w.dir); len(pids) != 0 {
				t.Fatalf("agents still running after destroy: %v", pids)
			}
			if r := w.expect(0, "state", "list"); strings.TrimSpace(r.stdout) != "" {
				t.Fatalf("state not empty after destroy:\n%s", r.stdout)
			}
			w.expect(0, "plan", "-destroy", "-detailed-exitcode")
		})
	}
}

const smallPool = `
pool "p" {
  nodes = 2
}

output "cm" {
  value = pool.p.central_manager
}
`

func TestSavedPlan(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", smallPool)
	w.expect(2, "plan", "-out", "tfplan", "-detailed-exitcode")
	r := w.expect(0, "show", "tfplan")
	if !strings.Contains(r.stdout, "pool.p will be created") {
		t.Fatalf("show of a saved plan:\n%s", r.stdout)
	}
	r = w.expect(0, "show", "-json", "tfplan")
	if !strings.Contains(r.stdout, `"resource_changes"`) || !strings.Contains(r.stdout, `"create"`) {
		t.Fatalf("show -json of a saved plan:\n%s", r.stdout)
	}
	w.expect(0, "apply", "tfplan")
	// The same plan again is stale: the state moved on.
	r = w.expect(1, "apply", "tfplan")
	if !strings.Contains(r.stderr, "stale") {
		t.Fatalf("reapplying a used plan: %s", r)
	}
	// A plan made before a configuration change is stale too.
	w.write("main.pond.hcl", strings.Replace(smallPool, "nodes = 2", "nodes = 3", 1))
	w.expect(2, "plan", "-out", "tfplan2", "-detailed-exitcode")
	w.write("main.pond.hcl", smallPool)
	r = w.expect(1, "apply", "tfplan2")
	if !strings.Contains(r.stderr, "configuration has changed") {
		t.Fatalf("applying a plan after a config change: %s", r)
	}
	w.expect(0, "destroy", "-auto-approve")
}

func TestJSONOutputs(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", smallPool)
	w.expect(2, "plan", "-out", "tfplan", "-detailed-exitcode")
	r := w.expect(0, "show", "-json", "tfplan")
	for _, want := range []string{`"address": "pool.p"`, `"actions": [`, `"create"`} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("show -json tfplan lacks %s:\n%s", want, r.stdout)
		}
	}
	w.expect(0, "apply", "tfplan")
	r = w.expect(0, "show", "-json")
	if !strings.Contains(r.stdout, `"address": "pool.p"`) || !strings.Contains(r.stdout, `"central_manager"`) {
		t.Fatalf("show -json:\n%s", r.stdout)
	}
	r = w.expect(0, "state", "list", "-json")
	if strings.TrimSpace(r.stdout) != `[
  "pool.p"
]` {
		t.Fatalf("state list -json:\n%s", r.stdout)
	}
	r = w.expect(0, "output", "-raw", "cm")
	if !strings.HasPrefix(r.stdout, "127.0.0.1:") {
		t.Fatalf("output -raw cm = %q", r.stdout)
	}
	r = w.expect(0, "version", "-json")
	if !strings.Contains(r.stdout, `"pond_version"`) {
		t.Fatalf("version -json:\n%s", r.stdout)
	}
}

func TestStateCommands(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", smallPool)
	w.expect(0, "apply", "-auto-approve")
	r := w.expect(0, "state", "show", "pool.p")
	if !strings.Contains(r.stdout, `pool "p" {`) || !strings.Contains(r.stdout, "central_manager") {
		t.Fatalf("state show:\n%s", r.stdout)
	}
	pulled := w.expect(0, "state", "pull").stdout
	w.write("pulled.json", pulled)
	w.expect(0, "state", "mv", "pool.p", "pool.q")
	if r := w.expect(0, "state", "list"); strings.TrimSpace(r.stdout) != "pool.q" {
		t.Fatalf("state list after mv:\n%s", r.stdout)
	}
	// Pushing the older copy is refused (lower serial), then forced.
	r = w.expect(1, "state", "push", "pulled.json")
	if !strings.Contains(r.stderr, "serial") {
		t.Fatalf("push of an older state: %s", r)
	}
	w.expect(0, "state", "push", "-force", "pulled.json")
	if r := w.expect(0, "state", "list"); strings.TrimSpace(r.stdout) != "pool.p" {
		t.Fatalf("state list after push:\n%s", r.stdout)
	}
	// rm forgets the pool without touching its nodes; import adopts them.
	w.expect(0, "state", "rm", "pool.p")
	if len(agentPIDs(w.dir)) != 2 {
		t.Fatal("state rm stopped the nodes")
	}
	w.expect(0, "import", "pool.p", "p")
	w.expect(0, "plan", "-detailed-exitcode")
	w.expect(0, "destroy", "-auto-approve")
}

func TestBadConfigurations(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, src, want string
	}{
		{"unknown argument", "pool \"p\" {\n  nodez = 2\n}\n", "main.pond.hcl line 2"},
		{"wrong type", "pool \"p\" {\n  nodes = \"many\"\n}\n", "main.pond.hcl line 2"},
		{"syntax", "pool \"p\" {\n  nodes = \n}\n", "main.pond.hcl line 2"},
		{"undeclared reference", "pool \"p\" {\n  nodes = var.missing\n}\n", "main.pond.hcl line 2"},
		{"cycle", "pool \"a\" {\n  nodes = length(pool.b.members)\n}\npool \"b\" {\n  nodes = length(pool.a.members)\n}\n", "Cycle"},
		{"unknown block", "pools \"p\" {\n}\n", "main.pond.hcl line 1"},
		{"bad validation", "variable \"n\" {\n  default = 0\n  validation {\n    condition = var.n > 0\n    error_message = \"n must be positive.\"\n  }\n}\n", "n must be positive."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkdir(t, "")
			w.write("main.pond.hcl", tt.src)
			r := w.expect(1, "plan", "-input=false")
			if !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("stderr lacks %q:\n%s", tt.want, r)
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine") {
				t.Fatalf("pondctl panicked:\n%s", r)
			}
		})
	}
}

func TestCorruptStateIsRefusedAndKept(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", smallPool)
	garbage := `{"format_version": 1, "serial": 3, "lineage": "x", "resources": [`
	w.write("pond.state", garbage)
	r := w.expect(1, "apply", "-auto-approve")
	if !strings.Contains(r.stderr, "pond.state") {
		t.Fatalf("error does not name the state file:\n%s", r)
	}
	data, _ := os.ReadFile(filepath.Join(w.dir, "pond.state"))
	if string(data) != garbage {
		t.Fatal("the corrupt state file was changed")
	}
	w.write("pond.state", `{"format_version": 99, "serial": 1, "lineage": "x", "resources": []}`)
	r = w.expect(1, "plan")
	if !strings.Contains(r.stderr, "newer") {
		t.Fatalf("a newer state format is not refused clearly:\n%s", r)
	}
	os.Remove(filepath.Join(w.dir, "pond.state"))
	if len(agentPIDs(w.dir)) != 0 {
		t.Fatal("agents started despite the refused state")
	}
}

func TestLockTimeout(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", smallPool)
	w.expect(0, "apply", "-auto-approve")
	// A live process holds the lock: this test's own.
	lock := filepath.Join(w.dir, "pond.state.lock.info")
	info := fmt.Sprintf(`{"ID":"held-by-test","Operation":"OperationTypeApply","Who":"someone@elsewhere","Version":"0.1.0","Created":"%s","Path":"pond.state","PID":%d}`, time.Now().UTC().Format(time.RFC3339), os.Getpid())
	w.write("pond.state.lock.info", info)
	r := w.expect(1, "plan")
	if !strings.Contains(r.stderr, "held-by-test") {
		t.Fatalf("lock error does not name the holder:\n%s", r)
	}
	go func() {
		time.Sleep(time.Second)
		os.Remove(lock)
	}()
	w.expect(0, "plan", "-lock-timeout=20s")
	w.write("pond.state.lock.info", info)
	w.expect(0, "force-unlock", "-force", "held-by-test")
	w.expect(0, "destroy", "-auto-approve")
}

// TestKilledApplyLeavesNoOrphans kills pondctl in the middle of an apply:
// the next apply adopts or reaps what it started, and destroy leaves
// nothing running.
func TestKilledApplyLeavesNoOrphans(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", "pool \"p\" {\n  nodes = 6\n}\n")
	cmd := execPond(w, "apply", "-auto-approve")
	out := &lineWaiter{want: "Creating...", seen: make(chan struct{})}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-out.seen:
	case <-time.After(time.Minute):
		t.Fatal("apply never started creating")
	}
	time.Sleep(50 * time.Millisecond)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	w.expect(0, "apply", "-auto-approve")
	if n := len(agentPIDs(w.dir)); n != 6 {
		t.Fatalf("%d agents after the second apply, want 6", n)
	}
	w.expect(0, "plan", "-detailed-exitcode")
	w.expect(0, "destroy", "-auto-approve")
	if pids := agentPIDs(w.dir); len(pids) != 0 {
		t.Fatalf("orphan agents after destroy: %v", pids)
	}
}

// TestInterruptedApply sends SIGINT during an apply: pondctl starts nothing
// new, lets the work in flight finish, saves what it created, and a later
// apply finishes the job.
func TestInterruptedApply(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", `
pool "a" { nodes = 2 }
pool "b" { nodes = 2 }
pool "c" { nodes = 2 }
pool "d" { nodes = 2 }
`)
	cmd := execPond(w, "apply", "-auto-approve", "-parallelism=1")
	out := &lineWaiter{want: "Creating...", seen: make(chan struct{})}
	var errb strings.Builder
	cmd.Stdout, cmd.Stderr = out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-out.seen:
	case <-time.After(time.Minute):
		t.Fatal("apply never started creating")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if err == nil {
		t.Fatalf("interrupted apply exited 0:\n%s", out.buf.String())
	}
	if !strings.Contains(errb.String(), "Interrupt received") {
		t.Fatalf("no interrupt notice:\n%s", errb.String())
	}
	listed := strings.Fields(w.expect(0, "state", "list").stdout)
	if len(listed) == 0 || len(listed) == 4 {
		t.Fatalf("state after the interrupt holds %v: want the in-flight pool only", listed)
	}
	// Everything recorded is running; nothing else is.
	if got, want := len(agentPIDs(w.dir)), 2*len(listed); got != want {
		t.Fatalf("%d agents running for %d pools in state", got, len(listed))
	}
	w.expect(0, "apply", "-auto-approve")
	if n := len(strings.Fields(w.expect(0, "state", "list").stdout)); n != 4 {
		t.Fatalf("state has %d pools after the second apply, want 4", n)
	}
	w.expect(0, "destroy", "-auto-approve")
}

// TestJSONSyntax applies a configuration written in HCL's JSON syntax, with
// a variable set from a JSON var file and another from the environment.
func TestJSONSyntax(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.json", `{
  "variable": {
    "nodes": {"type": "number", "default": 1},
    "site":  {"type": "string"}
  },
  "pool": {
    "j": {
      "nodes": "${var.nodes}",
      "attributes": {"Site": "${var.site}"}
    }
  },
  "output": {
    "members": {"value": "${pool.j.members}"}
  }
}`)
	w.write("nodes.pondvars.json", `{"nodes": 2}`)
	w.env = append(w.env, "POND_VAR_site=json")
	w.expect(0, "validate")
	w.expect(0, "apply", "-auto-approve", "-var-file=nodes.pondvars.json")
	outs := w.outputs()
	if m, ok := outs["members"].([]any); !ok || len(m) != 2 {
		t.Fatalf("members = %v, want two nodes", outs["members"])
	}
	r := w.expect(0, "state", "show", "pool.j")
	if !strings.Contains(r.stdout, `"json"`) {
		t.Fatalf("the environment variable did not reach the pool:\n%s", r.stdout)
	}
	w.expect(0, "destroy", "-auto-approve", "-var-file=nodes.pondvars.json")
}
