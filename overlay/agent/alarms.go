package agent

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/overlay/tokenwatch"
)

// alarmWebhookTimeout bounds one attempt at an alarm's webhook;
// alarmWebhookAttempts bounds the attempts.
const (
	alarmWebhookTimeout  = 10 * time.Second
	alarmWebhookAttempts = 3
)

// credentialAlarms builds the alarms before the node's credentials expire
// (POND_CREDENTIAL_ALARMS): its token, its TLS certificate and its
// factory's delegated CA; their expiry goes to the startd's ads and the
// sea's tag, and each alarm to the log and, with
// POND_NOTIFY_WEBHOOK_URL, to the signed webhook.
func (a *Agent) credentialAlarms() (*tokenwatch.Alarms, error) {
	r := knobs.Reader(a.cfg.Knob)
	th, err := tokenwatch.Thresholds(r)
	if err != nil {
		return nil, err
	}
	hook, err := schedd.LoadWebhook(a.cfg.Knob)
	if err != nil {
		return nil, err
	}
	al := &tokenwatch.Alarms{Node: a.cfg.Name, Pool: a.cfg.Pool, Thresholds: th, Now: time.Now, Log: a.logger}
	if a.cfg.TokenFile != "" {
		al.Sources = append(al.Sources, tokenwatch.TokenSource(a.cfg.TokenFile, a.token))
	}
	if a.cfg.TLSCert != "" {
		al.Sources = append(al.Sources, tokenwatch.CertSource(a.cfg.TLSCert))
	}
	if h := a.factory; h != nil {
		al.Sources = append(al.Sources, func() (tokenwatch.Expiry, bool) {
			_, sub := h.Credentials()
			if sub == nil {
				return tokenwatch.Expiry{}, false
			}
			return tokenwatch.Expiry{Credential: tokenwatch.CredFactoryCA, Subject: sub.Cert.Subject.CommonName,
				Issued: sub.Cert.NotBefore, Expires: sub.Cert.NotAfter}, true
		})
	}
	if hook != nil {
		client := &http.Client{Timeout: alarmWebhookTimeout}
		al.Notify = func(ctx context.Context, alarm tokenwatch.Alarm) error {
			var err error
			for i := range alarmWebhookAttempts {
				if i > 0 {
					select {
					case <-ctx.Done():
						return err
					case <-time.After(time.Duration(i) * time.Second):
					}
				}
				cctx, cancel := context.WithTimeout(ctx, alarmWebhookTimeout)
				err = schedd.PostWebhook(cctx, client, hook.URL, hook.Key, "pond-agent", alarm)
				cancel()
				if err == nil {
					return nil
				}
			}
			return fmt.Errorf("%d attempts: %w", alarmWebhookAttempts, err)
		}
	}
	al.Changed = func(all, alarming []tokenwatch.Expiry) {
		if a.daemons != nil {
			a.daemons.SetCredentialAttrs(tokenwatch.AdAttrs(all, alarming))
			if err := a.daemons.Set(nil); err != nil {
				a.logger.Warn("cannot put the credentials' expiry in the slot ads", "err", err)
			}
		}
		if err := a.SetTags(map[string]string{api.TagCredExpiry: tokenwatch.Tag(alarming)}); err != nil {
			a.logger.Warn("cannot tag the node with its credentials' expiry", "err", err)
		}
	}
	return al, nil
}

// CredentialExpiries returns when each of the node's credentials expires,
// as last checked; nil before the agent starts.
func (a *Agent) CredentialExpiries() []tokenwatch.Expiry {
	if a.alarms == nil {
		return nil
	}
	return a.alarms.Expiries()
}
