package acceptance

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// consolePool is a local pool of two agents of two slots each.
const consolePool = `
pool "ui" {
  nodes  = 2
  slots  = 2
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.ui.central_manager
}
`

// TestConsole opens the web console of a local pool's central manager in
// headless Chromium: an unauthenticated page sends the browser to the
// login page, the login form takes the operator's token, and the slots
// and jobs pages show the pool's slots and the jobs submitted to it.
func TestConsole(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed")
	}
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", consolePool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")

	// Without a session, a page answers with a redirect to the login.
	cfg, err := auth.FindClientTLS(w.getenv, w.dir)
	if err != nil || cfg == nil {
		t.Fatalf("the pool speaks no TLS: %v", err)
	}
	base := "https://" + cm
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(base + "/ui/slots")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("GET /ui/slots without a session: %s %q, want 303 to /ui/login", resp.Status, resp.Header.Get("Location"))
	}

	var slots []string
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-af", "Name")
		slots = strings.Fields(r.stdout)
		if len(slots) != 4 {
			return fmt.Errorf("condor status: %d slots, want 4\n%s", len(slots), r)
		}
		return nil
	})

	// Browsers speak no TLS with the sea's Ed25519 certificates: the
	// operator opens the console through pondctl sea console.
	proxy := execPond(w, "sea", "console", "-sea", cm)
	out, err := proxy.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Process.Signal(syscall.SIGTERM); proxy.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("pondctl sea console: %v", err)
	}
	m := regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+`).FindString(line)
	if m == "" {
		t.Fatalf("pondctl sea console printed no address: %q", line)
	}
	base = m
	if resp, err := http.Post(base+"/ui/login", "application/x-www-form-urlencoded", strings.NewReader("token=x")); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a login through the proxy without an origin: %s", resp.Status)
	}

	b := startChromium(t, chromium)
	// The browser, sent to a page, lands on the login page.
	b.navigate(t, base+"/ui/slots")
	if loc := b.eval(t, "location.pathname"); loc != "/ui/login" {
		t.Fatalf("the browser opened /ui/slots without a session and is at %q (%s), want /ui/login:\n%s", loc, b.eval(t, "location.href"), b.eval(t, "document.body ? document.body.innerText : ''"))
	}
	// Logging in through the form, as an operator does.
	tok, _ := json.Marshal(w.token())
	b.eval(t, "document.getElementById('token').value = "+string(tok)+"; document.querySelector('form').submit(); 'ok'")
	b.waitFor(t, "location.pathname == '/ui/' && document.readyState == 'complete'")
	if c := b.eval(t, "document.cookie"); c != "" {
		t.Errorf("the page's script reads the session cookie %q: it must be HttpOnly", c)
	}
	b.navigate(t, base+"/ui/slots")
	dom := b.eval(t, "document.documentElement.outerHTML")
	for _, s := range slots {
		if !strings.Contains(dom, ">"+s+"<") {
			t.Errorf("the slots page does not show slot %s:\n%s", s, dom)
		}
	}
	if strings.Contains(dom, w.token()) {
		t.Error("the slots page shows the token")
	}

	// Jobs: six that sleep on four slots, four running and two idle.
	w.write("sleep.sub", "executable = /bin/sleep\narguments = 300\nqueue 6\n")
	w.expect(0, "condor", "submit", "-pool", cm, "sleep.sub")
	eventually(t, 60*time.Second, func() error {
		b.navigate(t, base+"/ui/jobs")
		dom = b.eval(t, "document.getElementById('owners').innerText")
		if !regexp.MustCompile(`total\s+2\s+4\s+0\s+0`).MatchString(dom) {
			return fmt.Errorf("jobs page's counts: %q, want 2 idle and 4 running", dom)
		}
		return nil
	})
	jobs := b.eval(t, "document.getElementById('jobs').innerText")
	for i := range 6 {
		if !strings.Contains(jobs, fmt.Sprintf("1.%d\t", i)) {
			t.Errorf("the jobs page does not list job 1.%d:\n%s", i, jobs)
		}
	}

	// The pool's history, from the slots page: the slots that went
	// Claimed for the jobs, then one machine's alone, then a constraint.
	b.navigate(t, base+"/ui/slots")
	b.eval(t, "document.querySelector('a[href=\"/ui/history\"]').click(); 'ok'")
	b.waitFor(t, "location.pathname == '/ui/history' && document.readyState == 'complete'")
	eventually(t, 30*time.Second, func() error {
		b.navigate(t, base+"/ui/history?since=1h")
		hist := b.eval(t, "(document.getElementById('slotstates') || document.body).innerText")
		for _, s := range slots {
			if !regexp.MustCompile(regexp.QuoteMeta(s) + `\t[^\n]*\tClaimed\tBusy\t`).MatchString(hist) {
				return fmt.Errorf("the history does not show %s Claimed/Busy:\n%s", s, hist)
			}
		}
		return nil
	})
	one := strings.SplitN(slots[0], "@", 2)[1]
	b.eval(t, "document.querySelector('input[name=machine]').value = "+strconv.Quote(one)+"; document.querySelector('form[action=\"/ui/history\"]').submit(); 'ok'")
	b.waitFor(t, "location.search.indexOf('machine=') >= 0 && document.readyState == 'complete'")
	hist := b.eval(t, "document.getElementById('slotstates').innerText")
	for _, s := range slots {
		if m := strings.SplitN(s, "@", 2)[1]; (m == one) != strings.Contains(hist, s) {
			t.Errorf("the history of machine %s, showing %s: %v:\n%s", one, s, strings.Contains(hist, s), hist)
		}
	}
	b.navigate(t, base+"/ui/history?since=1h&constraint="+url.QueryEscape(`State == "Claimed" && Name == "`+slots[1]+`"`))
	hist = b.eval(t, "document.getElementById('slotstates').innerText")
	if !strings.Contains(hist, slots[1]) || strings.Contains(hist, slots[0]+"\t") || strings.Contains(hist, "Unclaimed") {
		t.Errorf("the history where State == Claimed of %s:\n%s", slots[1], hist)
	}
	// The pool as it is, from the machine ads' snapshots: the slots the
	// jobs hold, Claimed (a slot's ad is stored at most every 5 s: its
	// last change within that time is stored at its end); a constraint
	// over the ads keeps one.
	b.navigate(t, base+"/ui/history")
	b.eval(t, "var f = document.querySelector('input[name=at]').form; f.querySelector('input[name=at]').value = '0s'; f.submit(); 'ok'")
	b.waitFor(t, "location.search.indexOf('at=0s') >= 0 && document.readyState == 'complete'")
	eventually(t, 20*time.Second, func() error {
		snaps := b.eval(t, "(document.getElementById('snapshots') || document.body).innerText")
		for _, s := range slots {
			if !regexp.MustCompile(regexp.QuoteMeta(s) + `\t[^\n]*\tClaimed\tBusy\t`).MatchString(snaps) {
				b.navigate(t, base+"/ui/history?at=0s")
				return fmt.Errorf("the pool as it is does not show %s Claimed/Busy:\n%s", s, snaps)
			}
		}
		return nil
	})
	b.navigate(t, base+"/ui/history?at=0s&constraint="+url.QueryEscape(`Name == "`+slots[1]+`" && Memory > 0`))
	snaps := b.eval(t, "(document.getElementById('snapshots') || document.body).innerText")
	if !strings.Contains(snaps, slots[1]) || strings.Contains(snaps, slots[0]+"\t") {
		t.Errorf("the pool as it is, where Name == %s:\n%s", slots[1], snaps)
	}
	w.expect(0, "condor", "rm", "-pool", cm, "1")
}

// browser is a headless Chromium driven through its DevTools protocol.
type browser struct {
	ws *wsConn
	id int
}

// startChromium starts headless Chromium with a fresh profile and
// connects to its page.
func startChromium(t *testing.T, path string) *browser {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, path, "--headless", "--disable-gpu", "--no-sandbox", "--remote-debugging-port=0",
		"--user-data-dir="+dir, "--ignore-certificate-errors", "--no-first-run", "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, u, ok := strings.Cut(sc.Text(), "DevTools listening on "); ok {
				found <- u
			}
		}
	}()
	var browserURL string
	select {
	case browserURL = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("chromium printed no DevTools address")
	}
	u, err := url.Parse(browserURL)
	if err != nil {
		t.Fatal(err)
	}
	var targets []struct {
		Type string `json:"type"`
		WS   string `json:"webSocketDebuggerUrl"`
	}
	eventually(t, 10*time.Second, func() error {
		resp, err := http.Get("http://" + u.Host + "/json/list")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		targets = nil
		if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
			return err
		}
		for _, tg := range targets {
			if tg.Type == "page" {
				return nil
			}
		}
		return errors.New("no page yet")
	})
	for _, tg := range targets {
		if tg.Type == "page" {
			ws, err := dialWS(tg.WS)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.conn.Close() })
			return &browser{ws: ws}
		}
	}
	panic("unreachable")
}

// call sends a DevTools command and returns its result.
func (b *browser) call(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	res, err := b.try(t, method, params)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// try is call that returns the browser's error for the method rather
// than failing the test (an evaluation in a page that a navigation
// replaced meanwhile fails so).
func (b *browser) try(t *testing.T, method string, params any) (json.RawMessage, error) {
	t.Helper()
	b.id++
	msg, _ := json.Marshal(map[string]any{"id": b.id, "method": method, "params": params})
	if err := b.ws.write(msg); err != nil {
		t.Fatal(err)
	}
	_ = b.ws.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		data, err := b.ws.read()
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var ans struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &ans) != nil || ans.ID != b.id {
			continue // an event
		}
		if ans.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, ans.Error.Message)
		}
		return ans.Result, nil
	}
}

// eval evaluates a JavaScript expression in the page and returns its
// value as a string.
func (b *browser) eval(t *testing.T, expr string) string {
	t.Helper()
	v, err := b.tryEval(t, expr)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// tryEval is eval that returns the browser's error.
func (b *browser) tryEval(t *testing.T, expr string) (string, error) {
	t.Helper()
	res, err := b.try(t, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true})
	if err != nil {
		return "", err
	}
	var v struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(res, &v); err != nil {
		t.Fatal(err)
	}
	switch x := v.Result.Value.(type) {
	case string:
		return x, nil
	case nil:
		return "", nil
	default:
		return fmt.Sprint(x), nil
	}
}

// waitFor waits until a JavaScript condition holds in the page. An
// evaluation that a navigation cut short (a form submitted, a page
// loading) is asked again.
func (b *browser) waitFor(t *testing.T, cond string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := b.tryEval(t, "!!("+cond+")")
		if v == "true" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never met %s (%v); it is at %s:\n%s", cond, err, b.eval(t, "location.href"), b.eval(t, "document.body ? document.body.innerText : ''"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// navigate loads u and waits for its page to load. The page it leaves is
// marked first, so that the wait is for the new page, not the old one
// still shown while u loads.
func (b *browser) navigate(t *testing.T, u string) {
	t.Helper()
	_, _ = b.tryEval(t, "window.__pondLeaving = true")
	b.call(t, "Page.navigate", map[string]any{"url": u})
	b.waitFor(t, "window.__pondLeaving === undefined && document.readyState == 'complete' && location.href != 'about:blank'")
}

// wsConn is the client end of a WebSocket (RFC 6455), enough for the
// DevTools protocol: text messages, masked as a client must.
type wsConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialWS(u string) (*wsConn, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	conn, err := net.DialTimeout("tcp", pu.Host, 10*time.Second)
	if err != nil {
		return nil, err
	}
	var key [16]byte
	_, _ = rand.Read(key[:])
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		pu.RequestURI(), pu.Host, base64.StdEncoding.EncodeToString(key[:]))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		conn.Close()
		return nil, fmt.Errorf("websocket %s: %s", u, resp.Status)
	}
	return &wsConn{conn: conn, r: r}, nil
}

func (c *wsConn) write(p []byte) error {
	hdr := []byte{0x81} // FIN, text
	switch n := len(p); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	hdr = append(hdr, mask[:]...)
	body := make([]byte, len(p))
	for i := range p {
		body[i] = p[i] ^ mask[i%4]
	}
	_, err := c.conn.Write(append(hdr, body...))
	return err
}

// read returns the next message, its fragments joined; control frames
// but a close are skipped.
func (c *wsConn) read() ([]byte, error) {
	var msg []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(c.r, h[:]); err != nil {
			return nil, err
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var e [2]byte
			if _, err := io.ReadFull(c.r, e[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(e[:]))
		case 127:
			var e [8]byte
			if _, err := io.ReadFull(c.r, e[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(e[:])
		}
		if n > 64<<20 {
			return nil, fmt.Errorf("websocket frame of %d bytes", n)
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(c.r, p); err != nil {
			return nil, err
		}
		switch op := h[0] & 0x0f; op {
		case 0x8:
			return nil, errors.New("websocket closed")
		case 0x0, 0x1, 0x2:
			msg = append(msg, p...)
			if h[0]&0x80 != 0 {
				return msg, nil
			}
		}
	}
}
