package ec2

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"

	"github.com/pond-htc/pond/overlay/knobs"
)

// NoticeFlags is the -spot-notices flag, read with the knobs
// (POND_SPOT_NOTICES, POND_IMDS_ENDPOINT, POND_IMDS_INTERVAL).
type NoticeFlags struct {
	spot *bool // nil: not given
}

// Define adds -spot-notices to fs.
func (n *NoticeFlags) Define(fs *flag.FlagSet) {
	fs.BoolFunc("spot-notices", "poll the EC2 instance metadata service (IMDSv2) for spot interruption notices and rebalance recommendations; a glidein drains at once on either and ends", func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		n.spot = &b
		return nil
	})
}

// Read reads the flag, or the knobs it overrides, into a Notices. Only a
// glidein (glideinID not empty) watches for notices: it ends once
// drained, and its instance with it.
func (n *NoticeFlags) Read(knobValues map[string]string, glideinID string) (Notices, error) {
	r := knobs.Reader(func(name string) (string, bool) { v, ok := knobValues[name]; return v, ok })
	var out Notices
	var err error
	if n.spot != nil {
		out.Spot = *n.spot
	} else if out.Spot, err = r.Bool(knobs.SpotNotices); err != nil {
		return out, err
	}
	if out.Endpoint, err = r.String(knobs.IMDSEndpoint); err != nil {
		return out, err
	}
	if e := out.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return out, fmt.Errorf("%s = %q: want a URL such as http://169.254.169.254", knobs.IMDSEndpoint, e)
		}
	}
	if out.Interval, err = r.Duration(knobs.IMDSInterval); err != nil {
		return out, err
	}
	if out.Spot && glideinID == "" {
		return out, errors.New("-spot-notices: only a glidein watches for them: give the glidein's ID with -glidein")
	}
	return out, nil
}
