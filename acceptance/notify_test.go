package acceptance

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// smtpMessage is a message the SMTP sink received.
type smtpMessage struct{ to, data string }

// startSMTPSink runs a small SMTP server on a real socket for the test:
// it holds the conversation a mail client has with a relay and keeps the
// messages it is given.
func startSMTPSink(t *testing.T) (addr string, got <-chan smtpMessage) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan smtpMessage, 64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				tp := textproto.NewConn(c)
				_ = tp.PrintfLine("220 sink ESMTP")
				var m smtpMessage
				for {
					line, err := tp.ReadLine()
					if err != nil {
						return
					}
					switch verb := strings.ToUpper(strings.Fields(line + " x")[0]); verb {
					case "EHLO", "HELO", "MAIL":
						_ = tp.PrintfLine("250 ok")
					case "RCPT":
						m.to = strings.TrimSpace(line[len("RCPT TO:"):])
						_ = tp.PrintfLine("250 ok")
					case "DATA":
						_ = tp.PrintfLine("354 go on")
						b, err := tp.ReadDotBytes()
						if err != nil {
							return
						}
						m.data = string(b)
						_ = tp.PrintfLine("250 queued")
						ch <- m
					case "QUIT":
						_ = tp.PrintfLine("221 bye")
						return
					default:
						_ = tp.PrintfLine("502 unknown")
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String(), ch
}

// TestNotification runs a job with notification = Complete: its owner's
// notify_user gets HTCondor's e-mail through the pool's SMTP_SERVER, and
// the webhook gets the event, signed with the pool's webhook key.
func TestNotification(t *testing.T) {
	t.Parallel()
	smtpAddr, mails := startSMTPSink(t)
	key := "notification-test-key-0123456789"
	type hookCall struct {
		body []byte
		sig  string
	}
	calls := make(chan hookCall, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls <- hookCall{b, r.Header.Get("X-Pond-Signature")}
	}))
	t.Cleanup(hook.Close)

	w := newWorkdir(t, "")
	keyFile := filepath.Join(w.dir, "webhook.key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.write("main.pond.hcl", fmt.Sprintf(`
pool "notify" {
  nodes  = 1
  slots  = 1
  config = {
    NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5",
    SMTP_SERVER = %q, MAIL_FROM = "pond@submit.example",
    POND_NOTIFY_WEBHOOK_URL = %q, POND_NOTIFY_WEBHOOK_KEY = %q
  }
}

output "cm" {
  value = pool.notify.central_manager
}
`, smtpAddr, hook.URL, keyFile))
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	w.write("job.sub", "executable = /bin/sh\narguments = \"-c 'exit 3'\"\nnotification = Complete\nnotify_user = alice@lab.example\nqueue\n")
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")

	select {
	case m := <-mails:
		if !strings.Contains(m.to, "alice@lab.example") {
			t.Errorf("e-mail to %s, want alice@lab.example", m.to)
		}
		for _, want := range []string{"Subject: Condor Job 1.0\n", "Condor job 1.0\n\t/bin/sh -c ", "exited normally with status 3\n"} {
			if !strings.Contains(m.data, want) {
				t.Errorf("e-mail lacks %q:\n%s", want, m.data)
			}
		}
	case <-time.After(90 * time.Second):
		t.Fatal("no e-mail within 90 s")
	}
	select {
	case c := <-calls:
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write(c.body)
		if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); !hmac.Equal([]byte(c.sig), []byte(want)) {
			t.Errorf("webhook signature %q, want %q", c.sig, want)
		}
		var n struct {
			Event    string `json:"event"`
			JobID    string `json:"job_id"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal(c.body, &n); err != nil || n.Event != "terminated" || n.JobID != "1.0" || n.ExitCode != 3 {
			t.Errorf("webhook body %s (%v)", c.body, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook call within 30 s")
	}
	// One message per event.
	time.Sleep(2 * time.Second)
	if len(mails) != 0 || len(calls) != 0 {
		t.Errorf("%d more e-mails and %d more webhook calls for one event", len(mails), len(calls))
	}
}

// TestStreamAndTail runs a job that prints, sleeps and prints again with
// stream_output: its output file has the first line while it runs, condor
// tail reads the running job's output, and condor tail -f follows it to
// the end. The submit warns of a command pond ignores.
func TestStreamAndTail(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", `
pool "stream" {
  nodes  = 1
  slots  = 2
  config = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1", UPDATE_INTERVAL = "5" }
}

output "cm" {
  value = pool.stream.central_manager
}
`)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	w.write("job.sub", `executable = /bin/sh
arguments = "-c 'echo first; sleep 5; echo second'"
output = out.txt
error = err.txt
stream_output = true
coresize = 0
queue
`)
	r := w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
	if !strings.Contains(r.stderr, "WARNING: submit command coresize is not supported by pond and is ignored") {
		t.Errorf("submit printed no warning for coresize:\n%s", r.stderr)
	}
	out := filepath.Join(w.dir, "out.txt")
	eventually(t, 60*time.Second, func() error {
		b, _ := os.ReadFile(out)
		if string(b) != "first\n" {
			return fmt.Errorf("out.txt is %q", b)
		}
		return nil
	})
	// The first line alone: the job still runs (its end brings both).
	if tr := w.expect(0, "condor", "tail", "-pool", cm, "1.0"); tr.stdout != "first\n" {
		t.Errorf("condor tail of the running job printed %q, want %q", tr.stdout, "first\n")
	}
	if tr := w.run("condor", "tail", "-pool", cm, "-stderr", "-maxbytes", "2", "1.0"); tr.code != 0 || tr.stdout != "" {
		t.Errorf("condor tail -stderr of the running job: %+v", tr)
	}
	f := w.expect(0, "condor", "tail", "-pool", cm, "-f", "1.0")
	if f.stdout != "first\nsecond\n" {
		t.Errorf("condor tail -f printed %q, want the whole output", f.stdout)
	}
	eventually(t, 30*time.Second, func() error {
		if b, _ := os.ReadFile(out); string(b) != "first\nsecond\n" {
			return fmt.Errorf("out.txt is %q at the end", b)
		}
		return nil
	})
	if tr := w.run("condor", "tail", "-pool", cm, "1.0"); tr.code == 0 {
		t.Errorf("condor tail of a job that ended succeeded: %+v", tr)
	}
}
