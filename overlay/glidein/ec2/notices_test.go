package ec2

import (
	"context"
	"strings"
	"testing"
)

// TestUserDataWatchesSpotNotices: a spot glidein's agent is started with
// -spot-notices (it drains at once on an interruption notice or a
// rebalance recommendation); an on-demand one's is not.
func TestUserDataWatchesSpotNotices(t *testing.T) {
	t.Parallel()
	for _, spot := range []bool{true, false} {
		s, err := New(context.Background(), Config{Region: "us-east-1", Endpoint: "http://127.0.0.1:1", AMI: "ami-1",
			InstanceTypes: []string{"t3.micro"}, Spot: spot})
		if err != nil {
			t.Fatal(err)
		}
		ud := s.UserData(request("pond-test-sp-0-aaaa"))
		if got := strings.Contains(ud, " -spot-notices "); got != spot {
			t.Errorf("spot %v: user data has -spot-notices: %v, want %v:\n%s", spot, got, spot, ud)
		}
	}
}
