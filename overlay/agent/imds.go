package agent

import (
	"context"
	"strconv"

	"github.com/pond-htc/pond/overlay/glidein/ec2"
)

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
