package ec2

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

// TestPollNotices reads the notices of amazon-ec2-metadata-mock, which
// answers only IMDSv2 requests (with a session token): nothing before its
// delay, then a spot interruption notice, or a rebalance recommendation.
func TestPollNotices(t *testing.T) {
	for _, tc := range []struct {
		name   string
		notice ec2test.Notice
		reason string
		says   string
	}{
		{"spot interruption", ec2test.SpotInterruption, glidein.ReasonSpotInterruption, "spot interruption notice: terminate at "},
		{"rebalance", ec2test.Rebalance, glidein.ReasonRebalance, "rebalance recommendation of "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := ec2test.StartMetadataMock(t, tc.notice, 3*time.Second)
			t.Setenv("AWS_EC2_METADATA_DISABLED", "true") // as on a test machine; the watch asks for the service
			ctx := context.Background()
			m, err := NewMetadata(ctx, endpoint)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := m.Poll(ctx); err != nil || n != nil {
				t.Fatalf("before the notice: %+v, %v; want none", n, err)
			}
			time.Sleep(3500 * time.Millisecond)
			n, err := m.Poll(ctx)
			if err != nil || n == nil || n.Reason != tc.reason || !strings.Contains(n.Message, tc.says) {
				t.Fatalf("after the notice: %+v, %v; want reason %s saying %q", n, err, tc.reason, tc.says)
			}
		})
	}
	t.Run("no service", func(t *testing.T) {
		m, err := NewMetadata(context.Background(), "http://"+closedAddr(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if n, err := m.Poll(ctx); err == nil || n != nil {
			t.Fatalf("with no metadata service: %+v, %v; want an error", n, err)
		}
	})
}

// TestParseNotice: what the metadata service's documents say, and a
// document that cannot be read still drains the node.
func TestParseNotice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path, body, reason, says string
		bad                      bool
	}{
		{spotActionPath, `{"action": "terminate", "time": "2026-11-25T10:00:00Z"}`, glidein.ReasonSpotInterruption, "terminate at 2026-11-25T10:00:00Z", false},
		{spotActionPath, `{"action": "stop"}`, glidein.ReasonSpotInterruption, "stop at an unknown time", false},
		{rebalancePath, `{"noticeTime": "2026-11-25T10:00:00Z"}`, glidein.ReasonRebalance, "recommendation of 2026-11-25T10:00:00Z", false},
		{spotActionPath, `<html>`, glidein.ReasonSpotInterruption, "unknown action", true},
		{rebalancePath, ``, glidein.ReasonRebalance, "unknown time", true},
	} {
		n, err := parseNotice(tc.path, []byte(tc.body))
		if n.Reason != tc.reason || !strings.Contains(n.Message, tc.says) || (err != nil) != tc.bad {
			t.Errorf("parseNotice(%s, %q) = %+v, %v; want %s saying %q, error %v", tc.path, tc.body, n, err, tc.reason, tc.says, tc.bad)
		}
	}
}

func FuzzParseNotice(f *testing.F) {
	f.Add(true, []byte(`{"action": "terminate", "time": "2026-11-25T10:00:00Z"}`))
	f.Add(false, []byte(`{"noticeTime": "2026-11-25T10:00:00Z"}`))
	f.Add(true, []byte(`{"action": 1}`))
	f.Fuzz(func(t *testing.T, spot bool, body []byte) {
		path := rebalancePath
		if spot {
			path = spotActionPath
		}
		n, _ := parseNotice(path, body)
		if n.Reason == "" || n.Message == "" {
			t.Fatalf("parseNotice(%s, %q) = %+v: a notice always drains, with a reason and a message", path, body, n)
		}
	})
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
