package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// seaKeyPool is a pool on every address of this machine with no encrypt:
// its agents gossip with the working directory's sea key.
const seaKeyPool = `
provider "local" {
  bind_address = "0.0.0.0"
}

variable "nodes" {
  type    = number
  default = 1
}

pool "open" {
  nodes = var.nodes
}

output "cm" {
  value = pool.open.central_manager
}
`

// TestSeaKeyRotation applies a pool on every address with no gossip key:
// the agents gossip encrypted with .pond/auth/gossip.key (0600), made by
// the apply. The key then rotates across the live sea as docs/security.md
// says (install, use, replace the file, remove), and a node added after
// it joins with the new key, which is the only one left.
func TestSeaKeyRotation(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", seaKeyPool)
	w.expect(0, "apply", "-auto-approve")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	cm := w.output("cm")

	path := filepath.Join(w.dir, ".pond", "auth", "gossip.key")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the sea key %s: %v, %v; want a file of mode 0600", path, fi, err)
	}
	old := strings.TrimSpace(readFile(t, path))
	var self api.Self
	if err := w.getJSON(cm, "/v1/self", &self); err != nil || !self.Encrypted {
		t.Fatalf("the central manager: encrypted = %v, %v", self.Encrypted, err)
	}
	keys := func() api.KeyResult {
		t.Helper()
		var res api.KeyResult
		r := w.expect(0, "sea", "keys", "-sea", cm, "list", "-json")
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("sea keys list: %v\n%s", err, r)
		}
		return res
	}
	if res := keys(); len(res.Keys) != 1 || res.Keys[old] != 1 {
		t.Fatalf("before the rotation the sea has the keys %v, want the sea key alone", res.Keys)
	}

	next := strings.TrimSpace(w.expect(0, "sea", "keygen").stdout)
	w.expect(0, "sea", "keys", "-sea", cm, "install", next)
	w.expect(0, "sea", "keys", "-sea", cm, "use", next)
	if err := os.WriteFile(path+".new", []byte(next+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	w.expect(0, "sea", "keys", "-sea", cm, "remove", old)

	w.expect(0, "apply", "-auto-approve", "-var=nodes=2")
	eventually(t, 30*time.Second, func() error {
		r := w.run("sea", "members", "-sea", cm, "-status", "alive", "-json")
		var ms []api.Member
		if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil {
			return fmt.Errorf("sea members: %v: %s", err, r)
		}
		if len(ms) != 2 {
			return fmt.Errorf("%d members alive: %s", len(ms), r.stdout)
		}
		return nil
	})
	if res := keys(); len(res.Keys) != 1 || res.Keys[next] != 2 || res.PrimaryKeys[next] != 2 {
		t.Fatalf("after the rotation and a new node the sea has the keys %v (primary %v), want the new one on both nodes", res.Keys, res.PrimaryKeys)
	}
}
