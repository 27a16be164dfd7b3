package agent

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/knobs"
)

// Notices configures a cloud glidein's watch on its instance metadata
// service (POND_SPOT_NOTICES).
type Notices struct {
	// Spot polls the instance metadata service for a spot interruption
	// notice and a rebalance recommendation.
	Spot bool
	// Endpoint is the metadata service's URL; empty is the SDK's
	// (AWS_EC2_METADATA_SERVICE_ENDPOINT, or http://169.254.169.254).
	Endpoint string
	// Interval is how often it is polled.
	Interval time.Duration
}

// The metadata paths of the notices, under /latest/meta-data/.
const (
	spotActionPath = "spot/instance-action"
	rebalancePath  = "events/recommendations/rebalance"
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

// imdsClient is the SDK's client of the instance metadata service, IMDSv2
// only (a session token on every request, no fallback to IMDSv1), at
// n.Endpoint when set. It only reads.
func imdsClient(ctx context.Context, n Notices) (*imds.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("the AWS configuration of the metadata service: %w", err)
	}
	return imds.NewFromConfig(cfg, func(o *imds.Options) {
		if n.Endpoint != "" {
			o.Endpoint = n.Endpoint
		}
		o.EnableFallback = aws.FalseTernary
		// AWS_EC2_METADATA_DISABLED keeps the SDK from taking credentials
		// from the metadata service; the notices were asked for.
		o.ClientEnableState = imds.ClientEnabled
	}), nil
}

// notice is a notice read from the metadata service: the glidein's
// reason to drain, and what the notice said.
type notice struct {
	reason, message string
}

// pollNotices reads the spot interruption notice and the rebalance
// recommendation once; nil when there is neither (the service answers
// 404). A notice whose document cannot be read is returned with the
// error.
func pollNotices(ctx context.Context, c *imds.Client) (*notice, error) {
	for _, path := range []string{spotActionPath, rebalancePath} {
		body, err := readMetadata(ctx, c, path)
		if err != nil || body != nil {
			if err != nil {
				return nil, err
			}
			n, err := parseNotice(path, body)
			return &n, err
		}
	}
	return nil, nil
}

// parseNotice reads the document at path (spotActionPath or
// rebalancePath). The notice stands even when its document cannot be
// read: the service said the instance is going.
func parseNotice(path string, body []byte) (notice, error) {
	var doc struct {
		Action     string `json:"action"`
		Time       string `json:"time"`
		NoticeTime string `json:"noticeTime"`
	}
	err := json.Unmarshal(body, &doc)
	if err != nil {
		err = fmt.Errorf("%s: %w: %.200q", path, err, body)
	}
	if path == rebalancePath {
		return notice{reason: glidein.ReasonRebalance,
			message: fmt.Sprintf("EC2 rebalance recommendation of %s", orDefault(doc.NoticeTime, "an unknown time"))}, err
	}
	return notice{reason: glidein.ReasonSpotInterruption,
		message: fmt.Sprintf("EC2 spot interruption notice: %s at %s", orDefault(doc.Action, "an unknown action"), orDefault(doc.Time, "an unknown time"))}, err
}

// readMetadata reads one metadata path: nil, nil when there is nothing
// there (404).
func readMetadata(ctx context.Context, c *imds.Client, path string) ([]byte, error) {
	out, err := c.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == 404 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s from the instance metadata service: %w", path, err)
	}
	defer out.Content.Close()
	body, err := io.ReadAll(io.LimitReader(out.Content, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("reading %s from the instance metadata service: %w", path, err)
	}
	return body, nil
}

// watchNotices polls the metadata service every interval until ctx ends
// or a notice comes; then it says why in the machine ad and the log and
// interrupts the glidein, which drains at once and ends. A service that
// does not answer is logged, once per kind of error, and polled again.
func (a *Agent) watchNotices(ctx context.Context) {
	n := a.cfg.Notices
	c, err := imdsClient(ctx, n)
	if err != nil {
		a.logger.Error("cannot watch for spot notices", "err", err)
		return
	}
	a.logger.Info("watching the instance metadata service for spot interruption and rebalance notices",
		"endpoint", orDefault(n.Endpoint, "the SDK's"), "interval", n.Interval)
	tick := time.NewTicker(n.Interval)
	defer tick.Stop()
	lastErr := ""
	for {
		pctx, cancel := context.WithTimeout(ctx, min(max(n.Interval, time.Second), 10*time.Second))
		got, err := pollNotices(pctx, c)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case got != nil:
			if err != nil {
				a.logger.Warn("an unreadable notice from the instance metadata service", "err", err)
			}
			a.logger.Warn("the instance is about to go: draining at once", "reason", got.reason, "message", got.message)
			a.noteDrain(got.reason, got.message)
			a.glidein.Interrupt(got.reason, got.message)
			return
		case err != nil:
			if msg := err.Error(); msg != lastErr {
				a.logger.Warn("the instance metadata service does not answer; polling it again", "err", err)
				lastErr = msg
			}
		default:
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// noteDrain puts why the node drains in its machine ad and its startd's
// slot ads, as PondDrainReason and PondDrainMessage.
func (a *Agent) noteDrain(reason, message string) {
	attrs := map[string]string{"PondDrainReason": strconv.Quote(reason), "PondDrainMessage": strconv.Quote(message)}
	a.ad.mu.Lock()
	for k, v := range a.ad.stamped {
		if _, ok := attrs[k]; !ok {
			attrs[k] = v
		}
	}
	a.ad.mu.Unlock()
	a.ad.stamp(attrs)
	if a.daemons == nil {
		return
	}
	a.daemons.setStamps(attrs)
	if err := a.daemons.set(nil); err != nil {
		a.logger.Warn("cannot put the drain's reason in the slot ads", "err", err)
	}
}

// orDefault is s, or def when s is empty, for logs.
func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}
