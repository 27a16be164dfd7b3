package ec2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pond-htc/pond/overlay/glidein"
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

// Notice is a notice read from the metadata service: the glidein's reason
// to drain (glidein.ReasonSpotInterruption or glidein.ReasonRebalance),
// and what the notice said.
type Notice struct {
	Reason, Message string
}

// Metadata reads the instance metadata service's notices.
type Metadata struct {
	c *imds.Client
}

// NewMetadata returns the SDK's client of the instance metadata service,
// IMDSv2 only (a session token on every request, no fallback to IMDSv1),
// at endpoint when not empty. It only reads.
func NewMetadata(ctx context.Context, endpoint string) (*Metadata, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("the AWS configuration of the metadata service: %w", err)
	}
	return &Metadata{c: imds.NewFromConfig(cfg, func(o *imds.Options) {
		if endpoint != "" {
			o.Endpoint = endpoint
		}
		o.EnableFallback = aws.FalseTernary
		// AWS_EC2_METADATA_DISABLED keeps the SDK from taking credentials
		// from the metadata service; the notices were asked for.
		o.ClientEnableState = imds.ClientEnabled
	})}, nil
}

// Poll reads the spot interruption notice and the rebalance
// recommendation once; nil when there is neither (the service answers
// 404). A notice whose document cannot be read is returned with the
// error.
func (m *Metadata) Poll(ctx context.Context) (*Notice, error) {
	for _, path := range []string{spotActionPath, rebalancePath} {
		body, err := m.read(ctx, path)
		if err != nil {
			return nil, err
		}
		if body != nil {
			n, err := parseNotice(path, body)
			return &n, err
		}
	}
	return nil, nil
}

// parseNotice reads the document at path (spotActionPath or
// rebalancePath). The notice stands even when its document cannot be
// read: the service said the instance is going.
func parseNotice(path string, body []byte) (Notice, error) {
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
		return Notice{Reason: glidein.ReasonRebalance,
			Message: fmt.Sprintf("EC2 rebalance recommendation of %s", textOr(doc.NoticeTime, "an unknown time"))}, err
	}
	return Notice{Reason: glidein.ReasonSpotInterruption,
		Message: fmt.Sprintf("EC2 spot interruption notice: %s at %s", textOr(doc.Action, "an unknown action"), textOr(doc.Time, "an unknown time"))}, err
}

// read reads one metadata path: nil, nil when there is nothing there
// (404).
func (m *Metadata) read(ctx context.Context, path string) ([]byte, error) {
	out, err := m.c.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
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

// WatchNotices polls the metadata service every n.Interval until ctx ends
// or a notice comes, which it passes to onNotice (the glidein drains at
// once and ends) before it returns. A service that does not answer is
// logged, once per kind of error, and polled again.
func WatchNotices(ctx context.Context, n Notices, logger *slog.Logger, onNotice func(Notice)) {
	m, err := NewMetadata(ctx, n.Endpoint)
	if err != nil {
		logger.Error("cannot watch for spot notices", "err", err)
		return
	}
	logger.Info("watching the instance metadata service for spot interruption and rebalance notices",
		"endpoint", textOr(n.Endpoint, "the SDK's"), "interval", n.Interval)
	tick := time.NewTicker(n.Interval)
	defer tick.Stop()
	lastErr := ""
	for {
		pctx, cancel := context.WithTimeout(ctx, min(max(n.Interval, time.Second), 10*time.Second))
		got, err := m.Poll(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case got != nil:
			if err != nil {
				logger.Warn("an unreadable notice from the instance metadata service", "err", err)
			}
			logger.Warn("the instance is about to go: draining at once", "reason", got.Reason, "message", got.Message)
			onNotice(*got)
			return
		case err != nil:
			if msg := err.Error(); msg != lastErr {
				logger.Warn("the instance metadata service does not answer; polling it again", "err", err)
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

// textOr is s, or def when s is empty, for logs.
func textOr(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}
