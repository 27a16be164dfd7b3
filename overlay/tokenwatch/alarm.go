package tokenwatch

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/knobs"
)

// The credentials an agent watches, by the names its alarms, machine ad
// and the sea's tag give them.
const (
	// CredToken is the node's token (-token-file).
	CredToken = "token"
	// CredCert is the node's TLS certificate (-tls-cert).
	CredCert = "cert"
	// CredFactoryCA is the delegated CA of a central manager's pilot
	// factory, which certifies its glideins.
	CredFactoryCA = "factory-ca"
)

// DefaultThresholds are the times before a credential's expiry at which
// an agent raises an alarm, unless POND_CREDENTIAL_ALARMS says otherwise.
var DefaultThresholds = []time.Duration{7 * 24 * time.Hour, 24 * time.Hour, time.Hour}

// Thresholds reads POND_CREDENTIAL_ALARMS: durations, the longest first
// once sorted; "0" alone turns the alarms off.
func Thresholds(r knobs.Reader) ([]time.Duration, error) {
	items, err := r.List(knobs.CredentialAlarms)
	if err != nil {
		return nil, err
	}
	var out []time.Duration
	for _, it := range items {
		d, err := knobs.ParseDuration(it)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", knobs.CredentialAlarms, it, err)
		}
		if d > 0 && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	return out, nil
}

// Expiry is when one of the node's credentials expires: the getter
// Alarms.Expiries returns them, for the machine ad and for metrics.
type Expiry struct {
	// Credential is CredToken, CredCert or CredFactoryCA.
	Credential string `json:"credential"`
	// File is where the credential is read from, "" when held in memory.
	File string `json:"file,omitempty"`
	// Subject names the credential: a token's subject, a certificate's
	// common name.
	Subject string `json:"subject,omitempty"`
	// Issued and Expires bound its life; Issued is zero when unknown.
	Issued  time.Time `json:"issued,omitzero"`
	Expires time.Time `json:"expires"`
}

// Source reads one credential's expiry; ok is false when the node has
// none (or it cannot be read: the token's own watch says so).
type Source func() (e Expiry, ok bool)

// TokenSource reads the expiry of the token token returns, kept in path.
func TokenSource(path string, token func() string) Source {
	return func() (Expiry, bool) {
		c, err := auth.ReadClaims(token())
		if err != nil || c.Expires.IsZero() {
			return Expiry{}, false
		}
		return Expiry{Credential: CredToken, File: path, Subject: c.Subject, Issued: c.IssuedAt, Expires: c.Expires}, true
	}
}

// CertSource reads the expiry of the first certificate of the PEM file
// at path, read again at each check (a certificate written over it is
// seen).
func CertSource(path string) Source {
	return func() (Expiry, bool) {
		certs, err := auth.ReadCertificates(path)
		if err != nil {
			return Expiry{}, false
		}
		c := certs[0]
		return Expiry{Credential: CredCert, File: path, Subject: c.Subject.CommonName, Issued: c.NotBefore, Expires: c.NotAfter}, true
	}
}

// Alarm is one alarm: a credential came within a threshold of its
// expiry. It is the body of the alarm's webhook.
type Alarm struct {
	// Event is "credential_expires".
	Event string `json:"event"`
	// Node and Pool name the agent.
	Node string `json:"node"`
	Pool string `json:"pool,omitempty"`
	Expiry
	// Threshold is the threshold crossed; Left the time left then.
	Threshold string    `json:"threshold"`
	Left      string    `json:"left"`
	Time      time.Time `json:"time"`
	// Renew says how to renew it.
	Renew string `json:"renew"`
}

// renewHint says how each credential is renewed (docs/security.md).
var renewHint = map[string]string{
	CredToken:     tokenRefresh,
	CredCert:      "write a new certificate and key over the files of -tls-cert and -tls-key (the key first, or both through renames): the agent reads them again without a restart; see docs/security.md, Rotating secrets",
	CredFactoryCA: "pondctl apply renews the pilot factory's delegated CA (it needs the authority's root key, which only the working directory holds); glideins already running keep their certificates until their own expiry; see docs/security.md",
}

// Alarms raises an alarm each time one of the node's credentials comes
// within one of the thresholds of its expiry: once for each threshold
// crossed (several crossed between two checks raise one), as a WARN log
// line, through Notify (the signed webhook) and through Changed (the
// machine ad and the sea's tag). A threshold no shorter than the
// credential's whole life raises none: a 5-hour glidein token does not
// alarm at the 1-day threshold from its first minute. A renewed
// credential (another expiry) starts again.
type Alarms struct {
	Node, Pool string
	// Thresholds, the longest first (Thresholds); none raises no alarm
	// but Expiries still reports.
	Thresholds []time.Duration
	Sources    []Source
	Now        func() time.Time
	Log        *slog.Logger
	// Notify, when set, delivers an alarm (the webhook); called from a
	// goroutine of its own, it must bound its own time.
	Notify func(ctx context.Context, a Alarm) error
	// Changed, when set, is called with the expiries and the alarming
	// ones whenever either changes (not at every check).
	Changed func(all, alarming []Expiry)

	mu       sync.Mutex
	expiries []Expiry
	alarming []Expiry
	level    map[string]int // credential+expiry: the thresholds crossed
	notified sync.WaitGroup
}

// Expiries returns the expiry of each credential the node holds, as last
// checked.
func (a *Alarms) Expiries() []Expiry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.expiries)
}

// Alarming returns the credentials that crossed a threshold, as last
// checked.
func (a *Alarms) Alarming() []Expiry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.alarming)
}

// Check reads each credential's expiry once and raises the alarms due.
func (a *Alarms) Check(ctx context.Context) {
	now := a.Now()
	var all, alarming []Expiry
	var raise []Alarm
	a.mu.Lock()
	if a.level == nil {
		a.level = map[string]int{}
	}
	seen := map[string]bool{}
	for _, src := range a.Sources {
		e, ok := src()
		if !ok {
			continue
		}
		all = append(all, e)
		key := e.Credential + "@" + strconv.FormatInt(e.Expires.Unix(), 10)
		seen[key] = true
		left := e.Expires.Sub(now)
		lvl, crossed := 0, time.Duration(0)
		for i, t := range a.Thresholds {
			if left <= t && (e.Issued.IsZero() || t < e.Expires.Sub(e.Issued)) {
				lvl, crossed = i+1, t
			}
		}
		if lvl > 0 {
			alarming = append(alarming, e)
		}
		if lvl > a.level[key] {
			a.level[key] = lvl
			if left > 0 { // the token's own watch says it expired
				raise = append(raise, Alarm{Event: "credential_expires", Node: a.Node, Pool: a.Pool, Expiry: e,
					Threshold: crossed.String(), Left: left.Round(time.Second).String(), Time: now.UTC(), Renew: renewHint[e.Credential]})
			}
		}
	}
	for k := range a.level {
		if !seen[k] {
			delete(a.level, k) // renewed or gone: bounded by the sources
		}
	}
	changed := !slices.Equal(all, a.expiries) || !slices.Equal(alarming, a.alarming)
	a.expiries, a.alarming = all, alarming
	a.mu.Unlock()
	for _, al := range raise {
		a.Log.Warn("the node's "+al.Credential+" expires in "+al.Left+" (alarm at "+al.Threshold+" before); "+al.Renew,
			"credential", al.Credential, "file", al.File, "subject", al.Subject,
			"expires", al.Expires.UTC().Format(time.RFC3339), "threshold", al.Threshold)
		if a.Notify != nil {
			a.notified.Add(1)
			go func() {
				defer a.notified.Done()
				if err := a.Notify(ctx, al); err != nil {
					a.Log.Warn("the credential alarm's webhook failed", "credential", al.Credential, "err", err)
				}
			}()
		}
	}
	if changed && a.Changed != nil {
		a.Changed(all, alarming)
	}
}

// Interval is how often Run checks: every CheckInterval, or more often
// when a threshold is short (a tenth of the shortest, a second at least).
func (a *Alarms) Interval() time.Duration {
	iv := CheckInterval
	if n := len(a.Thresholds); n > 0 {
		iv = min(iv, max(a.Thresholds[n-1]/10, time.Second))
	}
	return iv
}

// Run checks now and every Interval until ctx ends, then waits for the
// webhooks under way.
func (a *Alarms) Run(ctx context.Context) {
	defer a.notified.Wait()
	t := time.NewTicker(a.Interval())
	defer t.Stop()
	for {
		a.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tag is the value of the sea's tag api.TagCredExpiry for the alarming
// credentials: "NAME:UNIX" of the one that expires first; "" for none.
func Tag(alarming []Expiry) string {
	if len(alarming) == 0 {
		return ""
	}
	first := slices.MinFunc(alarming, func(x, y Expiry) int { return x.Expires.Compare(y.Expires) })
	return first.Credential + ":" + strconv.FormatInt(first.Expires.Unix(), 10)
}

// ParseTag reads a tag Tag wrote.
func ParseTag(v string) (credential string, expires time.Time, err error) {
	name, unix, ok := strings.Cut(v, ":")
	n, perr := strconv.ParseInt(unix, 10, 64)
	if !ok || name == "" || perr != nil {
		return "", time.Time{}, fmt.Errorf("credential expiry tag %q: want NAME:UNIX", v)
	}
	return name, time.Unix(n, 0), nil
}

// AdAttrs are the machine ad's attributes of the expiries, as ClassAd
// expression text: PondTokenExpiry, PondCertExpiry and PondFactoryCAExpiry
// (seconds since 1970) for the credentials the node holds, and
// PondCredentialExpiresSoon, true while one of them is past a threshold.
func AdAttrs(all, alarming []Expiry) map[string]string {
	attrs := map[string]string{"PondCredentialExpiresSoon": strconv.FormatBool(len(alarming) > 0)}
	for _, e := range all {
		if name, ok := adName[e.Credential]; ok {
			attrs[name] = strconv.FormatInt(e.Expires.Unix(), 10)
		}
	}
	return attrs
}

var adName = map[string]string{CredToken: "PondTokenExpiry", CredCert: "PondCertExpiry", CredFactoryCA: "PondFactoryCAExpiry"}
