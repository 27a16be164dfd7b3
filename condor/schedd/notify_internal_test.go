package schedd

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
)

// mail is a message an smtpSink received.
type mail struct {
	from, to string
	data     string
}

// smtpSink is a small SMTP server on a real socket: it speaks the SMTP
// conversation net/smtp has with it and keeps the messages.
type smtpSink struct {
	ln   net.Listener
	got  chan mail
	wg   sync.WaitGroup
	fail atomic.Int32 // messages to refuse (451) before accepting
}

func newSMTPSink(t *testing.T) *smtpSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpSink{ln: ln, got: make(chan mail, 16)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *smtpSink) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	tp := textproto.NewConn(c)
	_ = tp.PrintfLine("220 sink ESMTP")
	var m mail
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb := strings.ToUpper(strings.Fields(line + " x")[0])
		switch verb {
		case "EHLO", "HELO":
			_ = tp.PrintfLine("250 sink")
		case "MAIL":
			m = mail{from: strings.TrimPrefix(line[len("MAIL FROM:"):], "")}
			_ = tp.PrintfLine("250 ok")
		case "RCPT":
			if s.fail.Load() > 0 {
				s.fail.Add(-1)
				_ = tp.PrintfLine("451 try again later")
				continue
			}
			m.to = line[len("RCPT TO:"):]
			_ = tp.PrintfLine("250 ok")
		case "DATA":
			_ = tp.PrintfLine("354 go on")
			b, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			m.data = string(b)
			_ = tp.PrintfLine("250 queued")
			s.got <- m
		case "QUIT":
			_ = tp.PrintfLine("221 bye")
			return
		default:
			_ = tp.PrintfLine("502 unknown")
		}
	}
}

func (s *smtpSink) next(t *testing.T) mail {
	t.Helper()
	select {
	case m := <-s.got:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no e-mail arrived")
		return mail{}
	}
}

// hookSink is a webhook receiver that verifies the signature.
type hookSink struct {
	srv   *httptest.Server
	got   chan Notification
	bad   atomic.Int32 // bodies whose signature did not verify
	fail  atomic.Int32 // requests to answer 503 before accepting
	calls atomic.Int32
}

func newHookSink(t *testing.T, key []byte) *hookSink {
	h := &hookSink{got: make(chan Notification, 1000)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		if !VerifyWebhook(key, body, r.Header.Get(WebhookSignatureHeader)) {
			h.bad.Add(1)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if h.fail.Load() > 0 {
			h.fail.Add(-1)
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		var n Notification
		if err := json.Unmarshal(body, &n); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.got <- n
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// notifyingSchedd is a schedd with only what notifications need, its
// notifier running until the test ends.
func notifyingSchedd(t *testing.T, knobs string) *Schedd {
	t.Helper()
	cfg := config.New(config.Options{Host: config.HostInfo{FullHostname: "submit.example.org", Hostname: "submit"}})
	if err := cfg.ParseInto("test.cfg", []byte(knobs)); err != nil {
		t.Fatal(err)
	}
	n, err := loadNotifier(cfg, slog.New(slog.DiscardHandler), "example.org")
	if err != nil {
		t.Fatal(err)
	}
	n.backoff = 20 * time.Millisecond
	s := &Schedd{notify: n, opts: Options{Name: "schedd@submit"}, now: time.Now}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go n.run(ctx, &wg)
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s
}

func writeKey(t *testing.T) (string, []byte) {
	key := []byte("0123456789abcdef0123456789abcdef")
	p := filepath.Join(t.TempDir(), "hook.key")
	if err := os.WriteFile(p, append(key, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, key
}

func noteAd(t *testing.T, text string) *classad.Ad {
	t.Helper()
	ad, err := classad.ParseAd(text)
	if err != nil {
		t.Fatal(err)
	}
	return ad
}

// TestNotificationMail sends the e-mails of HTCondor's notification
// settings through a real SMTP conversation, and the same events, signed,
// to a webhook; failed deliveries are tried again.
func TestNotificationMail(t *testing.T) {
	t.Parallel()
	sink := newSMTPSink(t)
	keyFile, key := writeKey(t)
	hook := newHookSink(t, key)
	s := notifyingSchedd(t, "SMTP_SERVER = "+sink.ln.Addr().String()+"\nMAIL_FROM = pond@submit.example.org\n"+
		KnobWebhookURL+" = "+hook.srv.URL+"\n"+KnobWebhookKey+" = "+keyFile+"\n")
	id := jobqueue.JobID{Cluster: 7, Proc: 1}
	exited := joblog.Event{Type: joblog.Terminated, TerminatedNormally: true, ReturnValue: 3}
	held := joblog.Event{Type: joblog.Held, Message: "over memory", HoldCode: 34}
	userHeld := joblog.Event{Type: joblog.Held, Message: "via condor_hold", HoldCode: 1}
	removed := joblog.Event{Type: joblog.Aborted, Message: "via condor_rm"}
	ok := joblog.Event{Type: joblog.Terminated, TerminatedNormally: true}

	// One failure of each kind of delivery first: both are retried.
	sink.fail.Store(1)
	hook.fail.Store(1)
	s.notifyEvent(id, noteAd(t, `[Owner = "alice"; JobNotification = 2; Cmd = "/bin/sh"; Arguments = "-c 'exit 3'"; QDate = 1700000000; EmailAttributes = "Cmd, Missing"]`), exited)
	m := sink.next(t)
	if !strings.Contains(m.to, "alice@example.org") || !strings.Contains(m.from, "pond@submit.example.org") {
		t.Errorf("e-mail from %s to %s, want from pond@submit.example.org to alice@example.org (Owner@UID_DOMAIN)", m.from, m.to)
	}
	for _, want := range []string{"Subject: Condor Job 7.1\n", "Condor job 7.1\n\t/bin/sh -c 'exit 3'\n",
		"exited normally with status 3\n", "Submitted at:        ", "\n\nCmd = \"/bin/sh\"\n"} {
		if !strings.Contains(m.data, want) {
			t.Errorf("e-mail lacks %q:\n%s", want, m.data)
		}
	}
	select {
	case n := <-hook.got:
		if n.Event != "terminated" || n.JobID != "7.1" || n.ExitCode != 3 || n.Owner != "alice" || n.Schedd != "schedd@submit" {
			t.Errorf("webhook body %+v", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook call")
	}
	if hook.bad.Load() != 0 {
		t.Errorf("%d webhook bodies were not signed with the key", hook.bad.Load())
	}
	if c := hook.calls.Load(); c != 2 {
		t.Errorf("webhook called %d times, want 2 (one refused, one accepted)", c)
	}

	// Which events each setting sends, one message each.
	for _, tt := range []struct {
		name    string
		ad      string
		ev      joblog.Event
		subject string // "" for none
	}{
		{"complete: exit", `[Owner = "bob"; JobNotification = 2]`, ok, "Condor Job 7.1"},
		{"complete: hold", `[Owner = "bob"; JobNotification = 2]`, held, ""},
		{"never: exit", `[Owner = "bob"; JobNotification = 0]`, exited, ""},
		{"no setting: exit", `[Owner = "bob"]`, exited, ""},
		{"error: clean exit", `[Owner = "bob"; JobNotification = 3]`, ok, ""},
		{"error: exit code", `[Owner = "bob"; JobNotification = 3]`, exited, "Condor Job 7.1"},
		{"error: success exit code", `[Owner = "bob"; JobNotification = 3; JobSuccessExitCode = 3]`, exited, ""},
		{"error: signal", `[Owner = "bob"; JobNotification = 3]`, joblog.Event{Type: joblog.Terminated, Signal: 9}, "Condor Job 7.1"},
		{"error: hold", `[Owner = "bob"; JobNotification = 3]`, held, "Condor Job 7.1 put on hold"},
		{"error: user hold", `[Owner = "bob"; JobNotification = 3]`, userHeld, ""},
		{"always: user hold", `[Owner = "bob"; JobNotification = 1]`, userHeld, "Condor Job 7.1 put on hold"},
		{"always: remove", `[Owner = "bob"; JobNotification = 1]`, removed, "Condor Job 7.1 removed"},
		{"always: execute", `[Owner = "bob"; JobNotification = 1]`, joblog.Event{Type: joblog.Execute}, ""},
	} {
		s.notifyEvent(id, noteAd(t, tt.ad), tt.ev)
		// A marker after each case: what arrives before it is the case's.
		s.notifyEvent(id, noteAd(t, `[Owner = "marker"; JobNotification = 1]`), removed)
		var got []string
		for {
			m := sink.next(t)
			if strings.Contains(m.to, "marker@") {
				break
			}
			subj := m.data[strings.Index(m.data, "Subject: ")+len("Subject: "):]
			got = append(got, subj[:strings.Index(subj, "\n")])
		}
		want := []string{}
		if tt.subject != "" {
			want = []string{tt.subject}
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: e-mails %q, want %q", tt.name, got, want)
		}
	}
	// An address that would add lines to the message's header is not
	// written to.
	s.notifyEvent(id, noteAd(t, `[Owner = "bob"; NotifyUser = "eve@x.example\r\nBcc: all@x.example"; JobNotification = 1]`), removed)
	// notify_user is where the mail goes; an address without a domain
	// gets EMAIL_DOMAIN's (UID_DOMAIN here).
	s.notifyEvent(id, noteAd(t, `[Owner = "bob"; NotifyUser = "carol@lab.example"; JobNotification = 1]`), removed)
	if m := sink.next(t); !strings.Contains(m.to, "<carol@lab.example>") || !strings.Contains(m.data, "is being removed.\n\nvia condor_rm") {
		t.Errorf("notify_user: e-mail to %s:\n%s", m.to, m.data)
	}
}

// TestNotificationBounded: a webhook that never answers well is given up
// after notifyAttempts, and a full queue drops new notifications instead
// of blocking the job's state changes.
func TestNotificationBounded(t *testing.T) {
	t.Parallel()
	keyFile, key := writeKey(t)
	hook := newHookSink(t, key)
	hook.fail.Store(1 << 30)
	s := notifyingSchedd(t, KnobWebhookURL+" = "+hook.srv.URL+"\n"+KnobWebhookKey+" = "+keyFile+"\n")
	ad := noteAd(t, `[Owner = "bob"; JobNotification = 1]`)
	s.notifyEvent(jobqueue.JobID{Cluster: 1}, ad, joblog.Event{Type: joblog.Aborted})
	deadline := time.Now().Add(10 * time.Second)
	for s.notify.failed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c := hook.calls.Load(); s.notify.failed.Load() != 1 || c != notifyAttempts {
		t.Fatalf("dead webhook: %d given up after %d calls, want 1 after %d", s.notify.failed.Load(), c, notifyAttempts)
	}
	start := time.Now()
	for i := range notifyQueueLen * 2 {
		s.notifyEvent(jobqueue.JobID{Cluster: 2, Proc: i}, ad, joblog.Event{Type: joblog.Aborted})
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("queueing %d notifications took %v", notifyQueueLen*2, d)
	}
	if s.notify.dropped.Load() == 0 {
		t.Error("a full queue dropped nothing")
	}
}

// TestNotifierConfig refuses bad notification knobs.
func TestNotifierConfig(t *testing.T) {
	t.Parallel()
	keyFile, _ := writeKey(t)
	open := filepath.Join(t.TempDir(), "open.key")
	if err := os.WriteFile(open, []byte("0123456789abcdef0123"), 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ knobs, err string }{
		{KnobWebhookURL + " = ftp://x\n" + KnobWebhookKey + " = " + keyFile, "not an http"},
		{KnobWebhookURL + " = http://x", "needs " + KnobWebhookKey},
		{KnobWebhookURL + " = http://x\n" + KnobWebhookKey + " = " + open, "lets others read"},
		{KnobWebhookURL + " = http://x\n" + KnobWebhookKey + " = " + short, "16 at least"},
		{KnobWebhookURL + " = http://x\n" + KnobWebhookKey + " = /nonexistent/key", "no such file"},
	} {
		cfg := config.New(config.Options{})
		if err := cfg.ParseInto("t.cfg", []byte(tt.knobs+"\n")); err != nil {
			t.Fatal(err)
		}
		_, err := loadNotifier(cfg, slog.New(slog.DiscardHandler), "x")
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%q: %v, want an error with %q", tt.knobs, err, tt.err)
		}
	}
	cfg := config.New(config.Options{})
	_ = cfg.ParseInto("t.cfg", []byte("SMTP_SERVER = mail.example.org\n"))
	n, err := loadNotifier(cfg, slog.New(slog.DiscardHandler), "x")
	if err != nil || n.smtp != "mail.example.org:25" {
		t.Errorf("SMTP_SERVER without a port: %+v, %v", n, err)
	}
}

// TestNotificationWithoutServer: a job that asks for e-mail in a pool
// without SMTP_SERVER gets none, and the log says so, once.
func TestNotificationWithoutServer(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	var mu sync.Mutex
	n, err := loadNotifier(config.New(config.Options{}), slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil)), "example.org")
	if err != nil {
		t.Fatal(err)
	}
	s := &Schedd{notify: n, opts: Options{Name: "schedd@submit"}, now: time.Now}
	for range 3 {
		s.notifyEvent(jobqueue.JobID{Cluster: 1}, noteAd(t, `[Owner = "bob"; JobNotification = 1]`), joblog.Event{Type: joblog.Aborted})
	}
	mu.Lock()
	defer mu.Unlock()
	if c := strings.Count(buf.String(), "SMTP_SERVER is not set"); c != 1 || len(n.queue) != 0 {
		t.Errorf("logged %d times, queued %d:\n%s", c, len(n.queue), buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
