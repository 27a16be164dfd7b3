package daemon

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

// EffectiveConfig is the configuration a node advertises to its central
// manager's history: every knob set (the defaults left out) by name, its
// value as written, a secret knob's (config.Secret) as config.Secret
// ("(secret)"), and so is a value that holds a secret knob's value, so
// that no secret leaves the node. It returns the JSON
// text and its hash.
//
// The machine ad attributes a node agent stamps at run time (knobs set
// by the program, not a file, and named by STARTD_ATTRS: its credentials'
// expiries, its address) are its ad's, not configuration: they are left
// out, and out of STARTD_ATTRS.
func EffectiveConfig(cfg *config.Config) (text, hash string) {
	knobs := map[string]string{}
	stamped := stampedAttrs(cfg)
	// The values of the secret knobs: another knob whose value holds one
	// (a DSN with the password copied in) is redacted too, as
	// condor_config_val does.
	var secrets []string
	for _, n := range cfg.Names() {
		if !cfg.Secret(n) || strings.EqualFold(n, config.SecretKnobs) {
			continue
		}
		for _, get := range []func(string) (string, bool){cfg.Get, cfg.Raw} {
			if v, _ := get(n); v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	holdsSecret := func(v string) bool {
		for _, s := range secrets {
			if strings.Contains(v, s) {
				return true
			}
		}
		return false
	}
	for _, n := range cfg.Names() {
		if src, _ := cfg.Source(n); src.File == "<default>" || stamped[strings.ToUpper(n)] {
			continue
		}
		v, _ := cfg.Raw(n)
		if strings.EqualFold(n, "STARTD_ATTRS") && len(stamped) > 0 {
			var keep []string
			for _, a := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
				if !stamped[strings.ToUpper(a)] {
					keep = append(keep, a)
				}
			}
			if v = strings.Join(keep, " "); v == "" {
				continue
			}
		}
		if cfg.Secret(n) || holdsSecret(v) {
			v = config.Secret
		}
		knobs[n] = v
	}
	b, _ := json.Marshal(knobs) // sorted by name
	return string(b), history.ConfigHash(string(b))
}

// stampedAttrs returns the names (upper case) of the machine attributes
// an agent stamps at run time: named by STARTD_ATTRS and set by the
// program, not a file.
func stampedAttrs(cfg *config.Config) map[string]bool {
	stamped := map[string]bool{}
	for _, a := range cfg.List("STARTD_ATTRS") {
		if src, _ := cfg.Source(a); src.File == "<set>" {
			stamped[strings.ToUpper(a)] = true
		}
	}
	return stamped
}

// masterUpdate is the master's ad: Name and Machine the node's, and the
// hash of its effective configuration (PondConfigHash); the configuration
// itself goes as a private attribute (PondConfig), which only the
// collector and the negotiator see.
func (m *Master) masterUpdate(cfg *config.Config) *wire.UpdateRequest {
	text, hash := EffectiveConfig(cfg)
	ad := classad.NewAd()
	ad.SetString("MyType", wire.TypeMaster)
	ad.SetString("Name", m.opts.Name)
	ad.SetString("Machine", m.opts.Name)
	ad.SetString("MyAddress", "<"+m.Address()+">")
	ad.SetInt("DaemonStartTime", m.start.Unix())
	ad.SetString("PondConfigHash", hash)
	req := &wire.UpdateRequest{Type: wire.TypeMaster, Source: "master@" + m.opts.Name, Ads: []wire.Ad{wire.FromClassAd(ad)}}
	if len(text) <= history.MaxConfigText {
		req.Private = map[string]wire.Ad{m.opts.Name: {"PondConfig": classad.QuoteString(text)}}
	} else {
		m.log.Warn("the configuration is too large for the central manager's history; its changes are not recorded there",
			"bytes", len(text), "max", history.MaxConfigText)
	}
	return req
}

// advertise sends the master's ad to the central manager every
// MASTER_UPDATE_INTERVAL (default 300 s) and at once after each
// reconfiguration, until ctx ends; it then withdraws it.
func (m *Master) advertise(ctx context.Context) {
	interval := func() time.Duration {
		d, err := m.Config().Duration("MASTER_UPDATE_INTERVAL", 300*time.Second)
		if err != nil || d <= 0 {
			return 300 * time.Second
		}
		return d
	}
	send := func() bool {
		cfg := m.Config()
		addr := m.CollectorAddress()
		if addr == "" {
			return true
		}
		token := ""
		if m.opts.Token != nil {
			token = m.opts.Token()
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := wire.NewClient(addr, token).WithTLS(m.opts.TLS).Collector().Update(cctx, m.masterUpdate(cfg)); err != nil {
			if ctx.Err() == nil {
				m.log.Debug("advertising the master", "collector", addr, "err", err)
			}
			return false
		}
		return true
	}
	// A failed update (the collector not serving yet, or moving) is
	// tried again after a second, then twice as long up to ten seconds.
	retry := time.Second
	next := func(ok bool) time.Duration {
		if ok {
			retry = time.Second
			return interval()
		}
		d := min(interval(), retry)
		retry = min(2*retry, 10*time.Second)
		return d
	}
	t := time.NewTimer(next(send()))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			token := ""
			if m.opts.Token != nil {
				token = m.opts.Token()
			}
			if addr := m.CollectorAddress(); addr != "" && !strings.EqualFold(addr, m.Address()) {
				_ = wire.NewClient(addr, token).WithTLS(m.opts.TLS).Collector().Invalidate(cctx,
					&wire.InvalidateRequest{Type: wire.TypeMaster, Source: "master@" + m.opts.Name})
			}
			cancel()
			return
		case <-m.reconfigured:
		case <-t.C:
		}
		t.Reset(next(send()))
	}
}
