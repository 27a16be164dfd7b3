package acceptance

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// applyHistPool is a one-node pool whose configuration the second apply
// changes.
const applyHistPool = `
pool "ah" {
  nodes  = 1
  slots  = 1
  config = { MAX_JOBS_RUNNING = "%s" }
}

output "cm" {
  value = pool.ah.central_manager
}
`

// TestApplyHistoryOnCentralManager applies a pool and changes it with a
// second apply, run with a token whose subject is markup: the central
// manager keeps both records, under the subjects it authenticated,
// condor config-history -applies shows them, and the console's history
// page shows them escaped.
func TestApplyHistoryOnCentralManager(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", fmt.Sprintf(applyHistPool, "11"))
	first := w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	const evil = `<script>alert("pond")</script>`
	tok := strings.TrimSpace(w.expect(0, "token", "create", "-subject", evil, "-scope", "ADMINISTRATOR,READ").stdout)
	w.write("main.pond.hcl", fmt.Sprintf(applyHistPool, "22"))
	env := w.env
	w.env = append(append([]string{}, env...), "POND_TOKEN="+tok)
	second := w.expect(0, "apply", "-auto-approve")
	w.env = env
	for _, r := range []result{first, second} {
		if strings.Contains(r.stderr, "was not sent") {
			t.Errorf("an apply could not send its record:\n%s", r.stderr)
		}
	}

	type change struct {
		Address, Action string
		Attributes      []string
	}
	type record struct {
		Serial       uint64
		Command      string
		User         string
		TokenSubject string `json:"token_subject"`
		Changes      []change
	}
	var recs []record
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "config-history", "-pool", cm, "-since", "1h", "-applies", "-json")
		if r.code != 0 {
			return fmt.Errorf("config-history: %s", r)
		}
		recs = nil
		if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
			return fmt.Errorf("%v: %s", err, r.stdout)
		}
		if len(recs) != 2 {
			return fmt.Errorf("%d records, want 2: %+v", len(recs), recs)
		}
		return nil
	})
	if a := recs[0]; a.Command != "apply" || a.Serial == 0 || len(a.Changes) != 1 || a.Changes[0].Address != "pool.ah" || a.Changes[0].Action != "create" {
		t.Errorf("the first apply's record: %+v", a)
	}
	b := recs[1]
	if b.Command != "apply" || b.Serial <= recs[0].Serial || b.TokenSubject != evil || len(b.Changes) != 1 ||
		b.Changes[0].Action != "update" || !slices.Contains(b.Changes[0].Attributes, "config") {
		t.Errorf("the second apply's record: %+v", b)
	}
	if recs[0].TokenSubject == "" || recs[0].TokenSubject == evil {
		t.Errorf("the first apply's token subject %q: want the operator's own", recs[0].TokenSubject)
	}
	text := w.expect(0, "condor", "config-history", "-pool", cm, "-since", "1h").stdout
	if !strings.Contains(text, "pool.ah create") || !strings.Contains(text, "pool.ah update (config") || !strings.Contains(text, evil) {
		t.Errorf("config-history does not show the applies:\n%s", text)
	}
	// The state's values never reach the central manager's record.
	if all := w.expect(0, "condor", "config-history", "-pool", cm, "-since", "1h", "-applies", "-json").stdout; strings.Contains(all, `"22"`) || strings.Contains(all, `"11"`) {
		t.Errorf("a value in the records:\n%s", all)
	}

	// The console's history page, as the operator sees it.
	cfg, err := auth.FindClientTLS(w.getenv, w.dir)
	if err != nil || cfg == nil {
		t.Fatalf("the pool speaks no TLS: %v", err)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: cfg}}
	base := "https://" + cm
	resp, err := hc.PostForm(base+"/ui/login", url.Values{"token": {w.token()}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = hc.Get(base + "/ui/history?since=1h")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	if resp.StatusCode != 200 || !strings.Contains(page, `id="applies"`) || strings.Count(page, "pool.ah") < 2 {
		t.Fatalf("GET /ui/history: %s, no applies table with both records:\n%s", resp.Status, page)
	}
	if strings.Contains(page, evil) || !strings.Contains(page, "&lt;script&gt;") {
		t.Errorf("the token subject is not escaped on the history page:\n%s", page)
	}
	// A destroy sends its record before the pool goes.
	if r := w.expect(0, "destroy", "-auto-approve"); strings.Contains(r.stderr, "was not sent") {
		t.Errorf("the destroy could not send its record:\n%s", r.stderr)
	}
}
