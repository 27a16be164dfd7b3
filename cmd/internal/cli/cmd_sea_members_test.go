package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
)

// TestSeaMembersReach lists a sea of a central manager and a member behind
// a relay (its gossip tags name the relay, as a relayed agent's do) with
// `pondctl sea members`: -json gives every member a reach of direct or
// reverse and the relay's name in relay, and the table shows the same in
// its Reach and Relay columns.
func TestSeaMembersReach(t *testing.T) {
	dir := t.TempDir()
	cm := startCM(t, filepath.Join(dir, "cm"))

	w1, err := gossip.Start(t.Context(), gossip.Config{NodeName: "w1", BindAddr: "127.0.0.1:0", Profile: "fast",
		Tags: map[string]string{api.TagRole: api.RoleNode, api.TagRelay: "cm"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w1.Shutdown() })
	if _, err := w1.Join(t.Context(), []string{cm.Sea().GossipAddr()}, 0); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), append([]string{"-chdir=" + dir, "sea", "members", "-sea", cm.APIAddr()}, args...),
			strings.NewReader(""), &out, &errOut, []string{"HOME=" + dir})
		return code, out.String(), errOut.String()
	}
	type member struct {
		Name  string  `json:"name"`
		Reach *string `json:"reach"`
		Relay *string `json:"relay"`
	}
	var ms []member
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errOut := run("-json")
		if code != 0 {
			t.Fatalf("sea members -json: exit %d, %s", code, errOut)
		}
		ms = nil
		if err := json.Unmarshal([]byte(out), &ms); err != nil {
			t.Fatalf("sea members -json: %v\n%s", err, out)
		}
		if len(ms) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sea has %d members, want 2:\n%s", len(ms), out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	str := func(p *string) string {
		if p == nil {
			return "<absent>"
		}
		return *p
	}
	want := map[string][2]string{"cm": {"direct", "<absent>"}, "w1": {"reverse", "cm"}}
	for _, m := range ms {
		if got := [2]string{str(m.Reach), str(m.Relay)}; got != want[m.Name] {
			t.Errorf("%s: reach, relay = %q, want %q", m.Name, got, want[m.Name])
		}
	}

	code, out, errOut := run()
	if code != 0 {
		t.Fatalf("sea members: exit %d, %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", out)
	}
	if f := strings.Fields(lines[0]); fmt.Sprint(f) != "[Name Address Status Reach Relay Tags]" {
		t.Errorf("header %q", f)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 5 {
			t.Fatalf("row %q", l)
		}
		got, w := [2]string{f[3], f[4]}, want[f[0]]
		if w[1] == "<absent>" {
			w[1] = "-"
		}
		if got != w {
			t.Errorf("row %q: Reach, Relay = %q, want %q", l, got, w)
		}
	}
	if strings.Contains(out, "relay via") {
		t.Errorf("the table speaks of a relay the old way:\n%s", out)
	}
}
