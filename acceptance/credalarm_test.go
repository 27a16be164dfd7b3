package acceptance

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCredentialAlarm starts a pool whose node's token lasts 3 minutes,
// with an alarm 150 s before a credential expires: the agent logs the
// alarm once, posts the signed webhook, its slot ad says
// PondCredentialExpiresSoon with PondTokenExpiry, sea members shows the
// credexp tag, and pondctl plan warns, naming the pool, the token and the
// time left, and plans the pool's update that renews it.
func TestCredentialAlarm(t *testing.T) {
	t.Parallel()
	key := "credential-alarm-key-0123456789"
	bodies := make(chan [2]string, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- [2]string{string(b), r.Header.Get("X-Pond-Signature")}
	}))
	t.Cleanup(hook.Close)
	w := newWorkdir(t, "")
	keyFile := filepath.Join(w.dir, "webhook.key")
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	w.write("main.pond.hcl", fmt.Sprintf(`
provider "local" {
  node_token_lifetime = "3m"
}

pool "alarm" {
  nodes  = 1
  slots  = 1
  config = {
    UPDATE_INTERVAL = "5", POND_CREDENTIAL_ALARMS = "150s",
    POND_NOTIFY_WEBHOOK_URL = %q, POND_NOTIFY_WEBHOOK_KEY = %q
  }
}

output "cm" {
  value = pool.alarm.central_manager
}
`, hook.URL, keyFile))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	var body [2]string
	select {
	case body = <-bodies:
	case <-time.After(100 * time.Second):
		t.Fatal("no alarm webhook within 100 s")
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(body[0]))
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); body[1] != want {
		t.Errorf("webhook signature %q, want %q", body[1], want)
	}
	var al struct {
		Event, Credential, Node, Pool, Threshold string
	}
	if err := json.Unmarshal([]byte(body[0]), &al); err != nil || al.Event != "credential_expires" || al.Credential != "token" ||
		al.Node != "alarm-0" || al.Pool != "alarm" || al.Threshold != "2m30s" {
		t.Errorf("webhook body %s (%v)", body[0], err)
	}
	logFile := filepath.Join(w.dir, ".pond", "local", "nodes", "alarm-0", "agent.log")
	data, _ := os.ReadFile(logFile)
	if n := strings.Count(string(data), "the node's token expires in"); n != 1 {
		t.Errorf("%d alarm lines in the agent's log, want 1:\n%s", n, data)
	}
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-l")
		if !strings.Contains(r.stdout, "PondCredentialExpiresSoon = true") || !strings.Contains(r.stdout, "PondTokenExpiry = ") {
			return fmt.Errorf("slot ad without the alarm: %s", r)
		}
		return nil
	})
	r := w.expect(0, "sea", "members", "-sea", cm, "-json")
	if !strings.Contains(r.stdout, `"credexp": "token:`) && !strings.Contains(r.stdout, `"credexp":"token:`) {
		t.Errorf("sea members -json without the credexp tag:\n%s", r.stdout)
	}
	r = w.run("plan")
	out := r.stdout + r.stderr
	if !strings.Contains(out, "The token of node alarm-0 of pool alarm expires in") || !strings.Contains(out, "pool.alarm") {
		t.Errorf("plan does not warn of the token:\n%s", r)
	}
	select {
	case b := <-bodies:
		t.Errorf("a second alarm webhook for one threshold: %s", b[0])
	default:
	}
}
