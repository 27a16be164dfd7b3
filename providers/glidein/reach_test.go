package glidein

import (
	"context"
	"encoding/base64"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/pond-htc/pond/overlay/api"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
	"github.com/zclconf/go-cty/cty"
)

func TestReachOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cm, gossip, override string
		api, join, err             string
	}{
		{name: "specific", cm: "10.1.2.3:9000", gossip: "10.1.2.3:7946", api: "10.1.2.3:9000", join: "10.1.2.3:7946"},
		{name: "loopback stays", cm: "127.0.0.1:9000", gossip: "127.0.0.1:7946", api: "127.0.0.1:9000", join: "127.0.0.1:7946"},
		{name: "IPv6 wildcard takes the gossip host", cm: "[::]:9000", gossip: "[fd00::2]:7946", api: "[fd00::2]:9000", join: "[fd00::2]:7946"},
		{name: "IPv4 wildcard takes the gossip host", cm: "0.0.0.0:9000", gossip: "192.0.2.7:7946", api: "192.0.2.7:9000", join: "192.0.2.7:7946"},
		{name: "wildcard everywhere", cm: "[::]:9000", gossip: "0.0.0.0:7946", err: "central_manager_address"},
		{name: "override host keeps the port", cm: "[::]:9000", gossip: "[fd00::2]:7946", override: "cm.example.org", api: "cm.example.org:9000", join: "[fd00::2]:7946"},
		{name: "override with a port", cm: "10.0.0.1:9000", gossip: "10.0.0.1:7946", override: "203.0.113.5:443", api: "203.0.113.5:443", join: "10.0.0.1:7946"},
		{name: "override replaces a wildcard gossip host", cm: "[::]:9000", gossip: "0.0.0.0:7946", override: "cm.example.org", api: "cm.example.org:9000", join: "cm.example.org:7946"},
		{name: "override replaces a loopback gossip host", cm: "127.0.0.1:9000", gossip: "127.0.0.1:7946", override: "2001:db8::5", api: "[2001:db8::5]:9000", join: "[2001:db8::5]:7946"},
		{name: "loopback override keeps a loopback gossip", cm: "127.0.0.1:9000", gossip: "127.0.0.1:7946", override: "127.0.0.2", api: "127.0.0.2:9000", join: "127.0.0.1:7946"},
		{name: "no port", cm: "cm", gossip: "10.0.0.1:7946", err: "central manager address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, join, err := reachOf(tc.cm, tc.gossip, tc.override)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("reachOf(%q, %q, %q) = %q, %q, %v; want an error with %q", tc.cm, tc.gossip, tc.override, api, join, err, tc.err)
				}
				return
			}
			if err != nil || api != tc.api || join != tc.join {
				t.Fatalf("reachOf(%q, %q, %q) = %q, %q, %v; want %q, %q", tc.cm, tc.gossip, tc.override, api, join, err, tc.api, tc.join)
			}
		})
	}
}

func TestParseReachOverride(t *testing.T) {
	t.Parallel()
	for s, ok := range map[string]bool{
		"cm.example.org": true, "10.0.0.5": true, "10.0.0.5:9618": true, "[2001:db8::1]:9618": true, "2001:db8::1": true,
		"0.0.0.0": false, "[::]:9618": false, "": false, "cm:port": false, "a b": false, "http://cm": false,
	} {
		if err := parseReachOverride(s); (err == nil) != ok {
			t.Errorf("parseReachOverride(%q) = %v, want ok=%v", s, err, ok)
		}
	}
}

// localSite is a site that says where its glideins run.
type localSite struct {
	site.Site
	here bool
}

func (s localSite) OnThisMachine() bool { return s.here }

func TestCheckReach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	onMoto, err := ec2.New(ctx, ec2.Config{Endpoint: "http://127.0.0.1:5000", Region: "us-east-1", AMI: "ami-1",
		InstanceTypes: []string{"t3.micro"}, AgentBinary: "/bin/pondctl", BaseDir: "/var/lib/pond"})
	if err != nil {
		t.Fatal(err)
	}
	onAWS, err := ec2.New(ctx, ec2.Config{Region: "us-east-1", AMI: "ami-1",
		InstanceTypes: []string{"t3.micro"}, AgentBinary: "/bin/pondctl", BaseDir: "/var/lib/pond"})
	if err != nil {
		t.Fatal(err)
	}
	slurmLike := newProcSite(t.TempDir(), "node") // a site that cannot tell
	for _, tc := range []struct {
		name      string
		s         site.Site
		api, bind string
		ok        bool
	}{
		{"EC2 with a loopback endpoint is this machine", onMoto, "127.0.0.1:9000", "127.0.0.1", true},
		{"EC2 elsewhere refuses loopback", onAWS, "127.0.0.1:9000", "127.0.0.1", false},
		{"EC2 elsewhere takes a routable address", onAWS, "192.0.2.7:9000", "0.0.0.0", true},
		{"a site on other machines refuses loopback", localSite{slurmLike, false}, "[::1]:9000", "::1", false},
		{"a site on this machine takes loopback", localSite{slurmLike, true}, "[::1]:9000", "0.0.0.0", true},
		{"a site that cannot tell: glideins bound to loopback", slurmLike, "127.0.0.1:9000", "127.0.0.1", true},
		{"a site that cannot tell: glideins bound to every address", slurmLike, "127.0.0.1:9000", "0.0.0.0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Provider{kind: "aws", site: tc.s}
			err := p.checkReach(tc.api, tc.api, tc.bind)
			if (err == nil) != tc.ok {
				t.Fatalf("checkReach(%q, bind %q) = %v, want ok=%v", tc.api, tc.bind, err, tc.ok)
			}
		})
	}
}

// flagValues returns the values of -flag in the shell command line cmd.
func flagValues(cmd, flag string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?:^| )`+regexp.QuoteMeta(flag)+` ('[^']*'|[^ ]+)`).FindAllStringSubmatch(cmd, -1) {
		out = append(out, strings.Trim(m[1], "'"))
	}
	return out
}

// TestEC2UserDataReachesWildcardPool launches a glidein for a pool whose
// central manager listens on every address (bind_address 0.0.0.0, whose
// central_manager is "[::]:PORT"): the instance's user data names an
// address of the central manager's machine, neither a wildcard nor
// loopback, for its API and gossip, and the glidein started from it
// joins the pool.
func TestEC2UserDataReachesWildcardPool(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts agents")
	}
	endpoint := ec2test.Shared(t)
	ctx := context.Background()
	wd := t.TempDir()
	cm := startPoolOn(t, wd, "0.0.0.0")
	if h, _, _ := net.SplitHostPort(cm); !wildcard(h) {
		t.Fatalf("the pool's central_manager is %s: want a wildcard address for this test", cm)
	}
	_, client, ami := motoEC2(t, endpoint)
	s, err := ec2.New(ctx, ec2.Config{Endpoint: endpoint, Region: ec2test.Region, AMI: ami,
		InstanceTypes: []string{"t3.micro"}, AgentBinary: selfBinary(), BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := configured(t, wd, s, map[string]cty.Value{"bind_address": cty.StringVal("0.0.0.0")})
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(1)})
	state, err := applyConfig(t, p, "glidein.burst", cty.NullVal(cfg.Type()), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer destroyAll(t, p, "glidein.burst", state)
	want := ids(state)
	out, err := client.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			attr, err := client.DescribeInstanceAttribute(ctx, &awsec2.DescribeInstanceAttributeInput{
				InstanceId: in.InstanceId, Attribute: types.InstanceAttributeNameUserData})
			if err != nil {
				t.Fatal(err)
			}
			ud, err := base64.StdEncoding.DecodeString(aws.ToString(attr.UserData.Value))
			if err != nil {
				t.Fatal(err)
			}
			for _, flag := range []string{"-condor-host", "-join"} {
				vs := flagValues(string(ud), flag)
				if len(vs) != 1 {
					t.Fatalf("the user data names %s %d times, want once:\n%s", flag, len(vs), ud)
				}
				h, _, err := net.SplitHostPort(vs[0])
				if err != nil || wildcard(h) || site.IsLoopbackHost(h) {
					t.Errorf("the user data starts the agent with %s %s, which an instance elsewhere cannot reach:\n%s", flag, vs[0], ud)
				}
			}
			seen++
		}
	}
	if seen != 1 {
		t.Fatalf("moto has %d instances, want 1", seen)
	}
	machines := ec2test.NewMachines(t, endpoint)
	if err := machines.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := p.client(strings.Replace(cm, "[::]", "127.0.0.1", 1))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(40 * time.Second)
	for {
		ms, err := c.Members(ctx, api.MembersFilter{Status: api.StatusAlive})
		joined := 0
		for _, m := range ms {
			if slices.Contains(want, m.Name) && m.Tags[api.TagPool] == "campus" {
				joined++
			}
		}
		if err == nil && joined == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the glideins %v joined pool campus (%v)%s", joined, want, err, machines.Logs(15))
		}
		time.Sleep(200 * time.Millisecond)
	}
	destroyAll(t, p, "glidein.burst", state)
	if err := machines.Reap(ctx); err != nil {
		t.Fatal(err)
	}
}
