package schedd

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
)

// JobNotification's values (HTCondor's NOTIFY_*).
const (
	notifyNever    = 0
	notifyAlways   = 1
	notifyComplete = 2
	notifyError    = 3
)

// HTCondor's hold reason codes that are not errors of the job: a hold by
// the user (condor_hold), by the job's policy, or at submit.
const (
	holdCodeUserRequest     = 1
	holdCodeJobPolicy       = 3
	holdCodeSubmittedOnHold = 15
)

// The knobs of the webhook, beyond HTCondor.
const (
	// KnobWebhookURL is the URL the schedd POSTs a JSON body to for each
	// job event a notification is sent for.
	KnobWebhookURL = "POND_NOTIFY_WEBHOOK_URL"
	// KnobWebhookKey is the file (mode 0600) of the secret the body is
	// signed with (HMAC-SHA256, header WebhookSignatureHeader).
	KnobWebhookKey = "POND_NOTIFY_WEBHOOK_KEY"
)

// WebhookSignatureHeader carries "sha256=" and the hex HMAC-SHA256 of a
// webhook body under the key of KnobWebhookKey.
const WebhookSignatureHeader = "X-Pond-Signature"

// Bounds of the notification queue.
const (
	// notifyQueueLen bounds the notifications waiting to be delivered:
	// past it, new ones are dropped and counted.
	notifyQueueLen = 1000
	// notifyAttempts bounds the attempts at one delivery; a delivery
	// that failed that often is dropped and counted.
	notifyAttempts = 5
	// notifyTimeout bounds one attempt.
	notifyTimeout = 10 * time.Second
)

// Notification is a job event a notification is sent for: the webhook's
// JSON body, and what the e-mail is written from.
type Notification struct {
	// Event is "terminated", "held" or "removed".
	Event   string `json:"event"`
	JobID   string `json:"job_id"`
	Cluster int    `json:"cluster"`
	Proc    int    `json:"proc"`
	Owner   string `json:"owner"`
	Schedd  string `json:"schedd"`
	// Time is when the event happened (RFC 3339).
	Time time.Time `json:"time"`
	// ExitCode and Signal say how a terminated job exited: a signal
	// other than 0 means it died on that signal.
	ExitCode int `json:"exit_code"`
	Signal   int `json:"signal,omitempty"`
	// Reason is why the job was held or removed; HoldCode is its
	// HoldReasonCode.
	Reason   string `json:"reason,omitempty"`
	HoldCode int    `json:"hold_code,omitempty"`
	// To is the e-mail address (NotifyUser, else Owner@UID_DOMAIN);
	// not in the webhook's body.
	To string `json:"-"`
	// subject and body are the e-mail's.
	subject, body string
}

// delivery is one notification to one destination.
type delivery struct {
	n        *Notification
	webhook  bool // else e-mail
	attempts int
	next     time.Time
}

// notifier delivers job notifications by e-mail (SMTP_SERVER) and to a
// webhook (POND_NOTIFY_WEBHOOK_URL) from a bounded queue drained by one
// goroutine: the job's state changes never wait for a delivery. A
// delivery that fails is tried again with backoff, notifyAttempts times
// at most; a full queue drops new notifications. Both are counted and
// logged. Deliveries waiting when the schedd stops are not kept.
type notifier struct {
	log     *slog.Logger
	smtp    string // host:port; "" sends no e-mail
	from    string
	domain  string // appended to addresses without one
	host    string // this machine's name, for the body
	hook    string // webhook URL; "" for none
	key     []byte // webhook HMAC key
	client  *http.Client
	queue   chan *delivery
	dropped atomic.Int64 // notifications dropped: queue full
	failed  atomic.Int64 // deliveries given up after notifyAttempts
	sent    atomic.Int64 // deliveries made
	// noServer says the lack of SMTP_SERVER was logged.
	noServer atomic.Bool
	backoff  time.Duration
}

// loadNotifier reads the notification knobs: SMTP_SERVER (host or
// host:port, port 25 by default), MAIL_FROM, EMAIL_DOMAIN (else
// UID_DOMAIN), POND_NOTIFY_WEBHOOK_URL and POND_NOTIFY_WEBHOOK_KEY.
func loadNotifier(cfg *config.Config, log *slog.Logger, uidDomain string) (*notifier, error) {
	n := &notifier{log: log, queue: make(chan *delivery, notifyQueueLen), backoff: time.Second,
		client: &http.Client{Timeout: notifyTimeout}}
	n.host, _ = cfg.Get("FULL_HOSTNAME")
	if n.host == "" {
		n.host, _ = os.Hostname()
	}
	if v, _ := cfg.Get("SMTP_SERVER"); strings.TrimSpace(v) != "" {
		v = strings.TrimSpace(v)
		if _, _, err := net.SplitHostPort(v); err != nil {
			v = net.JoinHostPort(v, "25")
		}
		if _, port, _ := net.SplitHostPort(v); port == "" {
			return nil, fmt.Errorf("SMTP_SERVER: %q has no port", v)
		}
		n.smtp = v
	}
	n.domain, _ = cfg.Get("EMAIL_DOMAIN")
	n.domain = firstNonEmpty(strings.TrimSpace(n.domain), uidDomain)
	n.from, _ = cfg.Get("MAIL_FROM")
	n.from = firstNonEmpty(strings.TrimSpace(n.from), "condor@"+firstNonEmpty(n.host, "localhost"))
	hook, err := LoadWebhook(cfg.Get)
	if err != nil {
		return nil, err
	}
	if hook != nil {
		n.hook, n.key = hook.URL, hook.Key
	}
	return n, nil
}

// readWebhookKey reads a webhook key file: at least 16 bytes once
// trimmed, readable by its owner only.
func readWebhookKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %v lets others read the key (want 0600)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) < 16 {
		return nil, fmt.Errorf("%s: the key is %d bytes, want 16 at least", path, len(b))
	}
	return b, nil
}

// SignWebhook is the value of WebhookSignatureHeader for body under key.
func SignWebhook(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifyWebhook reports whether sig (WebhookSignatureHeader's value) signs
// body under key.
func VerifyWebhook(key, body []byte, sig string) bool {
	return hmac.Equal([]byte(sig), []byte(SignWebhook(key, body)))
}

// notifyEvent queues the notifications a job event calls for by the
// job's JobNotification, as HTCondor's shadow sends them: Complete on
// termination; Error on termination by a signal or with an exit code
// other than JobSuccessExitCode, and on a hold that is not the user's,
// the job policy's or at submit; Always on termination, any hold and
// removal; Never on none. It never blocks.
func (s *Schedd) notifyEvent(id jobqueue.JobID, ad *classad.Ad, ev joblog.Event) {
	n := s.notify
	if n == nil {
		return
	}
	var kind string
	switch ev.Type {
	case joblog.Terminated:
		kind = "terminated"
	case joblog.Held:
		kind = "held"
	case joblog.Aborted:
		kind = "removed"
	default:
		return
	}
	mode := int(ad.EvalNumber("JobNotification", nil, notifyNever))
	send := false
	switch mode {
	case notifyNever:
	case notifyAlways:
		send = true
	case notifyComplete:
		send = kind == "terminated"
	case notifyError:
		switch kind {
		case "terminated":
			success := int(ad.EvalNumber("JobSuccessExitCode", nil, 0))
			send = !ev.TerminatedNormally || ev.ReturnValue != success
		case "held":
			send = ev.HoldCode != holdCodeUserRequest && ev.HoldCode != holdCodeJobPolicy && ev.HoldCode != holdCodeSubmittedOnHold
		}
	default:
		// As HTCondor: when in doubt, send.
		send = true
	}
	if !send {
		return
	}
	owner, _ := ad.EvalAttr("Owner").StringValue()
	note := &Notification{Event: kind, JobID: id.String(), Cluster: id.Cluster, Proc: id.Proc, Owner: owner,
		Schedd: s.opts.Name, Time: firstTime(ev.Time, s.now()).UTC(), Reason: ev.Message, HoldCode: ev.HoldCode}
	if kind == "terminated" {
		note.ExitCode, note.Signal = ev.ReturnValue, ev.Signal
		if ev.TerminatedNormally {
			note.Signal = 0
		}
	}
	note.To, _ = ad.EvalAttr("NotifyUser").StringValue()
	note.To = strings.TrimSpace(firstNonEmpty(note.To, owner))
	if note.To != "" && !strings.Contains(note.To, "@") && n.domain != "" {
		note.To += "@" + n.domain
	}
	note.subject, note.body = mailText(n.host, note, ad, s.now())
	switch {
	case n.smtp == "":
		if !n.noServer.Swap(true) {
			n.log.Warn("a job asks for e-mail notification, but SMTP_SERVER is not set: no e-mail is sent (said once)",
				"job", note.JobID, "event", kind)
		}
	case note.To == "" || strings.ContainsAny(note.To, "\r\n<>,;\" \t"):
		n.log.Warn("no e-mail address to send a job's notification to", "job", note.JobID, "address", note.To)
	default:
		n.enqueue(&delivery{n: note})
	}
	if n.hook != "" {
		n.enqueue(&delivery{n: note, webhook: true})
	}
}

func firstTime(a, b time.Time) time.Time {
	if !a.IsZero() {
		return a
	}
	return b
}

// enqueue queues a delivery, or drops and counts it when the queue is
// full.
func (n *notifier) enqueue(d *delivery) {
	select {
	case n.queue <- d:
	default:
		c := n.dropped.Add(1)
		n.log.Warn("notification queue full: dropping a notification", "job", d.n.JobID, "event", d.n.Event, "dropped", c)
	}
}

// run delivers the queued notifications until ctx ends; a failed
// delivery is queued again after its backoff, without blocking the
// queue's other deliveries.
func (n *notifier) run(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	var retry []*delivery
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var wait time.Duration = time.Hour
		if len(retry) > 0 {
			wait = max(time.Until(retry[0].next), 0)
		}
		t.Reset(wait)
		var d *delivery
		select {
		case <-ctx.Done():
			if left := len(retry) + len(n.queue); left > 0 {
				n.log.Warn("schedd stopping: notifications not delivered", "count", left)
			}
			return
		case d = <-n.queue:
		case <-t.C:
			if len(retry) == 0 {
				continue
			}
			d, retry = retry[0], retry[1:]
		}
		err := n.deliver(ctx, d)
		if err == nil {
			n.sent.Add(1)
			continue
		}
		d.attempts++
		if d.attempts >= notifyAttempts || len(retry) >= notifyQueueLen {
			c := n.failed.Add(1)
			n.log.Warn("giving up a notification", "job", d.n.JobID, "event", d.n.Event, "webhook", d.webhook,
				"attempts", d.attempts, "failed", c, "err", err)
			continue
		}
		n.log.Info("notification not delivered: trying again", "job", d.n.JobID, "webhook", d.webhook, "attempt", d.attempts, "err", err)
		d.next = time.Now().Add(n.backoff << (d.attempts - 1))
		// Keep retry ordered by next.
		i := len(retry)
		for i > 0 && retry[i-1].next.After(d.next) {
			i--
		}
		retry = append(retry, nil)
		copy(retry[i+1:], retry[i:])
		retry[i] = d
	}
}

// deliver makes one attempt at a delivery.
func (n *notifier) deliver(ctx context.Context, d *delivery) error {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	if d.webhook {
		return n.post(ctx, d.n)
	}
	return n.mail(ctx, d.n)
}

// post sends the notification's JSON body to the webhook, signed.
func (n *notifier) post(ctx context.Context, note *Notification) error {
	return PostWebhook(ctx, n.client, n.hook, n.key, "pond-schedd", note)
}

// Webhook is a webhook's URL and the key its bodies are signed with, as
// POND_NOTIFY_WEBHOOK_URL and POND_NOTIFY_WEBHOOK_KEY give them.
type Webhook struct {
	URL string
	Key []byte
}

// LoadWebhook reads POND_NOTIFY_WEBHOOK_URL and POND_NOTIFY_WEBHOOK_KEY
// through get; nil when no URL is set.
func LoadWebhook(get func(name string) (string, bool)) (*Webhook, error) {
	v, _ := get(KnobWebhookURL)
	if v = strings.TrimSpace(v); v == "" {
		return nil, nil
	}
	if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
		return nil, fmt.Errorf("%s: %q is not an http:// or https:// URL", KnobWebhookURL, v)
	}
	keyFile, _ := get(KnobWebhookKey)
	if strings.TrimSpace(keyFile) == "" {
		return nil, fmt.Errorf("%s: needs %s, the file of the key its body is signed with", KnobWebhookURL, KnobWebhookKey)
	}
	key, err := readWebhookKey(strings.TrimSpace(keyFile))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KnobWebhookKey, err)
	}
	return &Webhook{URL: v, Key: key}, nil
}

// PostWebhook POSTs v as a JSON body to url, signed with key in
// WebhookSignatureHeader, within ctx; an answer other than 2xx is an
// error. agent names the sender (User-Agent).
func PostWebhook(ctx context.Context, client *http.Client, url string, key []byte, agent string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", agent)
	req.Header.Set(WebhookSignatureHeader, SignWebhook(key, body))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// mail sends the notification's e-mail through SMTP_SERVER.
func (n *notifier) mail(ctx context.Context, note *Notification) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", n.smtp)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	host, _, _ := net.SplitHostPort(n.smtp)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return fmt.Errorf("SMTP %s: %w", n.smtp, err)
	}
	defer c.Close()
	if err := c.Hello(firstNonEmpty(n.host, "localhost")); err != nil {
		return fmt.Errorf("SMTP %s: %w", n.smtp, err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		// Opportunistic: a server that offers TLS gets it.
		if err := c.StartTLS(nil); err != nil {
			return fmt.Errorf("SMTP %s: STARTTLS: %w", n.smtp, err)
		}
	}
	if err := c.Mail(n.from); err != nil {
		return fmt.Errorf("SMTP %s: MAIL FROM: %w", n.smtp, err)
	}
	if err := c.Rcpt(note.To); err != nil {
		return fmt.Errorf("SMTP %s: RCPT TO %s: %w", n.smtp, note.To, err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("SMTP %s: DATA: %w", n.smtp, err)
	}
	msg := "From: " + n.from + "\r\nTo: " + note.To + "\r\nSubject: " + note.subject +
		"\r\nDate: " + note.Time.Format(time.RFC1123Z) + "\r\n\r\n" + strings.ReplaceAll(note.body, "\n", "\r\n")
	if _, err := w.Write([]byte(msg)); err != nil {
		return fmt.Errorf("SMTP %s: %w", n.smtp, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("SMTP %s: %w", n.smtp, err)
	}
	return c.Quit()
}

// mailText is the subject and body of a notification's e-mail, as
// HTCondor's shadow writes them.
func mailText(host string, note *Notification, ad *classad.Ad, now time.Time) (subject, body string) {
	subject = "Condor Job " + note.JobID
	var b strings.Builder
	fmt.Fprintf(&b, "This is an automated email from the Condor system\non machine %q.  Do not reply.\n\n", host)
	fmt.Fprintf(&b, "Condor job %s\n", note.JobID)
	if cmd, _ := ad.EvalAttr("Cmd").StringValue(); cmd != "" {
		args, _ := ad.EvalAttr("Arguments").StringValue()
		if args == "" {
			args, _ = ad.EvalAttr("Args").StringValue()
		}
		if args != "" {
			fmt.Fprintf(&b, "\t%s %s\n", cmd, args)
		} else {
			fmt.Fprintf(&b, "\t%s\n", cmd)
		}
	}
	switch note.Event {
	case "held", "removed":
		action := "put on hold"
		if note.Event == "removed" {
			action = "removed"
		}
		subject += " " + action
		fmt.Fprintf(&b, "\nis being %s.\n\n%s\n", action, note.Reason)
		return subject, b.String()
	}
	if note.Signal != 0 {
		fmt.Fprintf(&b, "died on signal %d\n", note.Signal)
	} else {
		fmt.Fprintf(&b, "exited normally with status %d\n", note.ExitCode)
	}
	qdate := int64(ad.EvalNumber("QDate", nil, 0))
	fmt.Fprintf(&b, "\n\nSubmitted at:        %s\n", time.Unix(qdate, 0).Format(time.ANSIC))
	fmt.Fprintf(&b, "Completed at:        %s\n", now.Format(time.ANSIC))
	fmt.Fprintf(&b, "Real Time:           %s\n", dhms(now.Unix()-qdate))
	fmt.Fprintf(&b, "\nVirtual Image Size:  %d Kilobytes\n\n", int64(ad.EvalNumber("ImageSize", nil, 0)))
	user, sys := ad.EvalNumber("RemoteUserCpu", nil, 0), ad.EvalNumber("RemoteSysCpu", nil, 0)
	fmt.Fprintf(&b, "Statistics from last run:\n")
	fmt.Fprintf(&b, "Allocation/Run time:     %s\n", dhms(int64(ad.EvalNumber("RemoteWallClockTime", nil, 0))))
	fmt.Fprintf(&b, "Remote User CPU Time:    %s\n", dhms(int64(user)))
	fmt.Fprintf(&b, "Remote System CPU Time:  %s\n", dhms(int64(sys)))
	fmt.Fprintf(&b, "Total Remote CPU Time:   %s\n", dhms(int64(user+sys)))
	emailAttributes(&b, ad)
	return subject, b.String()
}

// emailAttributes writes the job's attributes its EmailAttributes lists
// (email_attributes), "NAME = EXPR" a line, after a blank line, as
// HTCondor does.
func emailAttributes(b *strings.Builder, ad *classad.Ad) {
	list, _ := ad.EvalAttr("EmailAttributes").StringValue()
	first := true
	for _, name := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		e, ok := ad.Lookup(name)
		if !ok {
			continue
		}
		if first {
			b.WriteString("\n\n")
			first = false
		}
		fmt.Fprintf(b, "%s = %s\n", name, e.String())
	}
}

// dhms writes seconds as HTCondor's d_format_time does: "D HH:MM:SS".
func dhms(secs int64) string {
	secs = max(secs, 0)
	return strconv.FormatInt(secs/86400, 10) + fmt.Sprintf(" %02d:%02d:%02d", secs%86400/3600, secs%3600/60, secs%60)
}
