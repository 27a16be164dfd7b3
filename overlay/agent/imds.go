package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"

	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/knobs"
)

// noticeFlags is the -spot-notices flag, read with the knobs.
type noticeFlags struct {
	spot *bool // nil: not given
}

func (n *noticeFlags) define(fs *flag.FlagSet) {
	fs.BoolFunc("spot-notices", "poll the EC2 instance metadata service (IMDSv2) for spot interruption notices and rebalance recommendations; a glidein drains at once on either and ends", func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		n.spot = &b
		return nil
	})
}

// apply reads the flag, or the knobs, into cfg.Notices. Only a glidein
// watches for notices: it ends once drained, and its instance with it.
func (n *noticeFlags) apply(cfg *Config) error {
	r := knobs.Reader(func(name string) (string, bool) { v, ok := cfg.Knobs[name]; return v, ok })
	var err error
	if n.spot != nil {
		cfg.Notices.Spot = *n.spot
	} else if cfg.Notices.Spot, err = r.Bool(knobs.SpotNotices); err != nil {
		return err
	}
	if cfg.Notices.Endpoint, err = r.String(knobs.IMDSEndpoint); err != nil {
		return err
	}
	if e := cfg.Notices.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s = %q: want a URL such as http://169.254.169.254", knobs.IMDSEndpoint, e)
		}
	}
	if cfg.Notices.Interval, err = r.Duration(knobs.IMDSInterval); err != nil {
		return err
	}
	if cfg.Notices.Spot && cfg.Glidein == "" {
		return errors.New("-spot-notices: only a glidein watches for them: give the glidein's ID with -glidein")
	}
	return nil
}

// watchNotices watches the instance metadata service until ctx ends or a
// notice comes (ec2.WatchNotices); then it says why in the machine ad and
// interrupts the glidein, which drains at once and ends.
func (a *Agent) watchNotices(ctx context.Context) {
	ec2.WatchNotices(ctx, a.cfg.Notices, a.logger, func(n ec2.Notice) {
		a.noteDrain(n.Reason, n.Message)
		a.glidein.Interrupt(n.Reason, n.Message)
	})
}

// noteDrain puts why the node drains in its machine ad and its startd's
// slot ads, as PondDrainReason and PondDrainMessage.
func (a *Agent) noteDrain(reason, message string) {
	attrs := map[string]string{"PondDrainReason": strconv.Quote(reason), "PondDrainMessage": strconv.Quote(message)}
	attrs = a.ad.Stamps(attrs)
	if a.daemons == nil {
		return
	}
	a.daemons.setStamps(attrs)
	if err := a.daemons.set(nil); err != nil {
		a.logger.Warn("cannot put the drain's reason in the slot ads", "err", err)
	}
}
