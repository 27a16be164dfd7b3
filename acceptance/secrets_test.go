package acceptance

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secretsConfig puts a sensitive variable in a pool's knobs, as it is and
// through a function, and in a sensitive output.
const secretsConfig = `variable "db" {
  type      = string
  sensitive = true
}

pool "vault" {
  nodes  = 2
  config = { DB_CONN = var.db, DB_CONN_UPPER = upper(var.db), NEGOTIATOR_INTERVAL = "5" }
}

output "cm" {
  value = pool.vault.central_manager
}

output "db" {
  value     = var.db
  sensitive = true
}
`

// TestSecretsStaySecret applies a pool whose knobs come from a sensitive
// variable holding a unique random secret, and checks that no output of
// pondctl (plan, apply, show, state, output, in text and JSON, with a
// saved plan), no API answer of the agents and no file under the working
// directory but the nodes' configuration files holds it, with pondctl and
// the agents logging at debug level; that plan sees the secret unchanged,
// and changed, and apply takes a changed one to the nodes; and that
// everything under .pond is private (directories 0700, files 0600 or
// stricter) after init, plan, apply and destroy.
func TestSecretsStaySecret(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	secret := "zq" + randomHex(t)
	other := "zq" + randomHex(t)
	secrets := []string{secret, other}
	base := w.env
	w.env = append(base, "POND_LOG=debug", "POND_LOG_PATH="+filepath.Join(w.dir, "pond.log"), "POND_VAR_db="+secret)
	w.write("main.pond.hcl", secretsConfig)

	var outs []string
	run := func(code int, args ...string) result {
		t.Helper()
		r := w.expect(code, args...)
		outs = append(outs, fmt.Sprintf("pondctl %s\n%s", strings.Join(args, " "), r))
		return r
	}
	run(0, "init")
	checkPrivate(t, w.dir, "init")
	if r := run(0, "plan", "-out", "vault.plan"); !strings.Contains(r.stdout, "DB_CONN             = (sensitive value)") {
		t.Errorf("plan does not show the knob as (sensitive value):\n%s", r)
	}
	checkPrivate(t, w.dir, "plan")
	run(0, "show", "vault.plan")
	run(0, "show", "-json", "vault.plan")
	run(0, "apply", "vault.plan")
	checkPrivate(t, w.dir, "apply")

	// The same secret: nothing to do; another: the pool is updated.
	run(0, "plan", "-detailed-exitcode")
	run(0, "plan", "-json")
	env := w.env
	w.env = append(env, "POND_VAR_db="+other)
	if r := run(2, "plan", "-detailed-exitcode"); !strings.Contains(r.stdout, "pool.vault will be updated in-place") {
		t.Errorf("a changed secret is not planned as an update:\n%s", r)
	}
	run(2, "plan", "-json", "-detailed-exitcode")
	grepFiles(t, w.dir, secrets)
	checkConfigFiles(t, w.dir, secret)
	// Applied, the new secret reaches the nodes, and the next plan has
	// nothing to do.
	run(0, "apply", "-auto-approve", "-json")
	run(0, "plan", "-detailed-exitcode")
	checkConfigFiles(t, w.dir, other)

	show := run(0, "show", "-json")
	run(0, "show")
	run(0, "state", "pull")
	run(0, "state", "show", "pool.vault")
	run(0, "output")
	run(0, "output", "-json")
	run(1, "output", "db")
	if !strings.Contains(show.stdout, `"DB_CONN": "(sensitive value)"`) {
		t.Errorf("show -json does not show the knob as (sensitive value):\n%s", show.stdout)
	}

	// What the agents answer.
	for _, api := range nodeAPIs(t, show.stdout) {
		resp, err := w.agentGet(api, "/v1/self")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, "GET /v1/self of "+api+"\n"+string(body))
		var self struct {
			Config map[string]string `json:"config"`
		}
		if err := json.Unmarshal(body, &self); err != nil {
			t.Fatalf("%s: %v\n%s", api, err, body)
		}
		for _, k := range []string{"DB_CONN", "DB_CONN_UPPER"} {
			if _, ok := self.Config[k]; ok {
				t.Errorf("%s /v1/self shows knob %s: %s", api, k, body)
			}
		}
		if self.Config["NEGOTIATOR_INTERVAL"] != "5" {
			t.Errorf("%s /v1/self lacks NEGOTIATOR_INTERVAL: %s", api, body)
		}
	}
	// The logs grepped are there, at debug level.
	logs, _ := filepath.Glob(filepath.Join(w.dir, ".pond", "local", "nodes", "*", "agent.log"))
	logs = append(logs, filepath.Join(w.dir, "pond.log"))
	for _, l := range logs {
		if data, err := os.ReadFile(l); err != nil || !strings.Contains(string(data), "DEBUG") {
			t.Errorf("%s: no debug records (%v)", l, err)
		}
	}
	if len(logs) != 3 {
		t.Errorf("logs %v, want pond.log and two agent.log", logs)
	}
	grepFiles(t, w.dir, secrets)

	run(0, "destroy", "-auto-approve")
	checkPrivate(t, w.dir, "destroy")
	grepFiles(t, w.dir, secrets)
	for _, o := range outs {
		for _, s := range secrets {
			if strings.Contains(strings.ToLower(o), strings.ToLower(s)) {
				t.Errorf("the secret %s is in:\n%s", s, o)
			}
		}
	}
	if len(outs) < 19 {
		t.Fatalf("only %d outputs checked", len(outs))
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// nodeAPIs returns the API addresses of the nodes show -json lists.
func nodeAPIs(t *testing.T, showJSON string) []string {
	t.Helper()
	var doc struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Values struct {
						NodeDetails []struct {
							API string `json:"api"`
						} `json:"node_details"`
					} `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal([]byte(showJSON), &doc); err != nil {
		t.Fatalf("show -json: %v\n%s", err, showJSON)
	}
	var apis []string
	for _, r := range doc.Values.RootModule.Resources {
		for _, n := range r.Values.NodeDetails {
			apis = append(apis, n.API)
		}
	}
	if len(apis) != 2 {
		t.Fatalf("show -json lists %d nodes, want 2:\n%s", len(apis), showJSON)
	}
	return apis
}

// isNodeConfig reports whether path is a node's configuration file, the
// one place a secret knob is written (the agent reads it there).
func isNodeConfig(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	return len(parts) == 5 && parts[0] == ".pond" && parts[1] == "local" && parts[2] == "nodes" && parts[4] == "condor_config"
}

// grepFiles fails the test for every file under root, but the nodes'
// configuration files, that holds one of secrets (in any case).
func grepFiles(t *testing.T, root string, secrets []string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || isNodeConfig(root, path) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		low := strings.ToLower(string(data))
		for _, s := range secrets {
			if strings.Contains(low, strings.ToLower(s)) {
				t.Errorf("%s holds the secret %s", path, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("only %d files under %s", n, root)
	}
}

// checkConfigFiles checks that each node's configuration file, private,
// holds the secret knobs and names them in POND_SECRET_KNOBS.
func checkConfigFiles(t *testing.T, root, secret string) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(root, ".pond", "local", "nodes", "*", "condor_config"))
	if len(paths) != 2 {
		t.Fatalf("%d node configuration files, want 2", len(paths))
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"DB_CONN = " + secret, "DB_CONN_UPPER = " + strings.ToUpper(secret), "POND_SECRET_KNOBS = DB_CONN, DB_CONN_UPPER"} {
			if !strings.Contains(string(data), want) {
				t.Errorf("%s lacks %q", p, want)
			}
		}
	}
}

// checkPrivate fails the test for every directory under root/.pond that is
// not 0700 and every file that others or the group may use.
func checkPrivate(t *testing.T, root, after string) {
	t.Helper()
	dir := filepath.Join(root, ".pond")
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		switch perm := fi.Mode().Perm(); {
		case fi.IsDir() && perm != 0o700:
			t.Errorf("after %s: directory %s has mode %04o, want 0700", after, path, perm)
		case fi.Mode().IsRegular() && perm&0o077 != 0:
			t.Errorf("after %s: file %s has mode %04o, want 0600 or stricter", after, path, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after %s: %v", after, err)
	}
}
