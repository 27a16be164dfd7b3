package ec2

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

func TestMain(m *testing.M) {
	// The tests that share moto run in parallel: they cannot set its
	// environment themselves (ec2test.Shared finds it set).
	for k, v := range ec2test.Env() {
		os.Setenv(k, v)
	}
	code := m.Run()
	ec2test.StopShared()
	os.Exit(code)
}

// startMoto gives the test the package's moto, emptied: one server for
// every test of the package, rather than seconds of Python start-up each.
func startMoto(t *testing.T) string { return ec2test.Shared(t) }

// newSite returns a site on moto's endpoint with an image moto knows.
func newSite(t *testing.T, endpoint string, types ...string) *Site {
	t.Helper()
	ctx := context.Background()
	if len(types) == 0 {
		types = []string{"t3.micro"}
	}
	s, err := New(ctx, Config{Endpoint: endpoint, Region: "us-east-1", AMI: "ami-00000000", InstanceTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	im, err := s.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{})
	if err != nil || len(im.Images) == 0 {
		t.Fatalf("moto's images: %v", err)
	}
	s.cfg.AMI = aws.ToString(im.Images[0].ImageId)
	return s
}

func request(id string) glidein.Request {
	return glidein.Request{
		ID:   id,
		Args: []string{"agent", "-name", id, "-data-dir", "{dir}", "-token-file", "{dir}/node.token"},
		Files: map[string][]byte{
			"node.token":    []byte("SECRET-TOKEN\n"),
			"node.key":      []byte("-----BEGIN PRIVATE KEY-----\nSECRET-KEY\n-----END PRIVATE KEY-----\n"),
			"condor_config": []byte("NUM_SLOTS = 1\n"),
		},
	}
}

func TestClientTokenStable(t *testing.T) {
	t.Parallel()
	a := ClientToken("pond-k-abc-burst-0-xyz", "t3.micro", "subnet-1")
	for range 3 {
		if b := ClientToken("pond-k-abc-burst-0-xyz", "t3.micro", "subnet-1"); b != a {
			t.Fatalf("token changed across calls: %s, %s", a, b)
		}
	}
	if len(a) > 64 {
		t.Errorf("token %q is longer than EC2's 64 characters", a)
	}
	for _, other := range []string{
		ClientToken("pond-k-abc-burst-1-xyz", "t3.micro", "subnet-1"),
		ClientToken("pond-k-abc-burst-0-xyz", "t3.small", "subnet-1"),
		ClientToken("pond-k-abc-burst-0-xyz", "t3.micro", "subnet-2"),
	} {
		if other == a {
			t.Errorf("two launches share the token %s", a)
		}
	}
}

// TestClientTokenSent records the RunInstances requests a Submit sends,
// through a proxy in front of moto: the ClientToken is there, and the same
// when the same glidein is submitted again.
func TestClientTokenSent(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	var tokens []string
	proxy := recordingProxy(t, endpoint, func(form map[string]string) {
		if form["Action"] == "RunInstances" {
			tokens = append(tokens, form["ClientToken"])
		}
	})
	s := newSite(t, proxy)
	ctx := context.Background()
	req := request("pond-test-tok-0-aaaa")
	if _, err := s.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	// A second pondctl that lost the answer and did not List first:
	// the same token goes out again (EC2 answers with the first instance).
	if _, err := s.ec2.RunInstances(ctx, s.runInput(req, "t3.micro", "", "")); err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0] == "" || tokens[0] != tokens[1] || tokens[0] != ClientToken(req.ID, "t3.micro", "") {
		t.Fatalf("ClientTokens sent: %q, want twice %q", tokens, ClientToken(req.ID, "t3.micro", ""))
	}
}

func TestSubmitListCancel(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	s := newSite(t, endpoint)
	ctx := context.Background()
	req := request("pond-test-lc-0-aaaa")
	g, err := s.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if g.ID != req.ID || !strings.HasPrefix(g.SiteID, "i-") {
		t.Fatalf("Submit = %+v", g)
	}
	// No secret in the user data; the agent is told where to fetch it.
	attr, err := s.ec2.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{
		InstanceId: aws.String(g.SiteID), Attribute: types.InstanceAttributeNameUserData})
	if err != nil {
		t.Fatal(err)
	}
	ud, _ := base64.StdEncoding.DecodeString(aws.ToString(attr.UserData.Value))
	if strings.Contains(string(ud), "SECRET") {
		t.Fatalf("user data holds a secret:\n%s", ud)
	}
	if !strings.Contains(string(ud), "-credentials ssm:/pond/"+req.ID) || !strings.Contains(string(ud), "-data-dir /var/lib/pond/"+req.ID) {
		t.Fatalf("user data does not start the agent with its credential path:\n%s", ud)
	}
	// The instance's credential is in SSM, as the agent reads it.
	ac, err := LoadAWS(ctx, "us-east-1", "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	files, err := FetchCredential(ctx, ac, s.ParameterPath(req.ID), false)
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range req.Files {
		if string(files[n]) != string(want) {
			t.Errorf("SSM %s = %q, want %q", n, files[n], want)
		}
	}
	// Another Submit of the ID starts nothing.
	if _, err := s.Submit(ctx, req); !errors.Is(err, glidein.ErrDuplicate) {
		t.Fatalf("second Submit: %v, want ErrDuplicate", err)
	}
	if _, err := s.Submit(ctx, request("pond-test-lc-1-bbbb")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, request("pond-other-0-cccc")); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx, "pond-test-lc-")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != req.ID || list[1].ID != "pond-test-lc-1-bbbb" {
		t.Fatalf("List = %+v, want the two glideins of the prefix", list)
	}
	for _, g := range list {
		if g.State.Ended() {
			t.Errorf("%s is %s before Cancel", g.ID, g.State)
		}
	}
	if err := s.Cancel(ctx, req.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(ctx, req.ID); err != nil {
		t.Fatalf("Cancel again: %v", err)
	}
	list, err = s.List(ctx, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !list[0].State.Ended() {
		t.Fatalf("after Cancel: %+v, want one ended", list)
	}
	if _, err := FetchCredential(ctx, ac, s.ParameterPath(req.ID), false); err == nil {
		t.Fatal("the credential is still in SSM after Cancel")
	}
}

func TestFetchCredentialDeletes(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	s := newSite(t, endpoint)
	ctx := context.Background()
	req := request("pond-test-fd-0-aaaa")
	if _, err := s.putCredential(ctx, req); err != nil {
		t.Fatal(err)
	}
	ac, err := LoadAWS(ctx, "", "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FetchCredential(ctx, ac, s.ParameterPath(req.ID), true); err != nil {
		t.Fatal(err)
	}
	if _, err := FetchCredential(ctx, ac, s.ParameterPath(req.ID), false); err == nil {
		t.Fatal("read twice: the credential was not deleted once read")
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	ctx := context.Background()
	good := newSite(t, endpoint)
	if err := good.Check(ctx); err != nil {
		t.Fatalf("Check of a good configuration: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"unknown ami", func(c *Config) { c.AMI = "ami-0badbadbadbadbad0" }, "ami-0badbadbadbadbad0"},
		{"unknown instance type", func(c *Config) { c.InstanceTypes = []string{"t3.micro", "x9.huge"} }, "x9.huge"},
		{"unknown subnet", func(c *Config) { c.Subnets = []string{"subnet-0000dead"} }, "subnet-0000dead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Site{cfg: good.cfg, ec2: good.ec2, ssm: good.ssm}
			tc.edit(&s.cfg)
			err := s.Check(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no ami", Config{InstanceTypes: []string{"t3.micro"}}, "ami"},
		{"no types", Config{AMI: "ami-1"}, "instance_types"},
		{"reserved tag", Config{AMI: "ami-1", InstanceTypes: []string{"t3.micro"}, Tags: map[string]string{"pond:id": "x"}}, "reserved"},
		{"bad prefix", Config{AMI: "ami-1", InstanceTypes: []string{"t3.micro"}, ParameterPrefix: "pond"}, "parameter_prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Region = "us-east-1"
			_, err := New(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error about %s", err, tc.want)
			}
		})
	}
}

// TestCapacityFallback: while EC2 has no capacity for an instance type in
// a subnet, the next subnet and then the next type are tried, each with a
// token of its own; any other error fails at once; no capacity anywhere
// is an error naming every attempt.
func TestCapacityFallback(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	ctx := context.Background()
	base := newSite(t, endpoint)
	vpc, err := base.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.9.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	var subnets []string
	for _, cidr := range []string{"10.9.1.0/24", "10.9.2.0/24"} {
		sn, err := base.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(cidr)})
		if err != nil {
			t.Fatal(err)
		}
		subnets = append(subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	for _, tc := range []struct {
		name     string
		short    map[string]string // "TYPE SUBNET" -> error code
		wantType string
		wantErr  string
		tries    int
	}{
		{"first fits", nil, "t3.micro", "", 1},
		{"next subnet", map[string]string{"t3.micro " + subnets[0]: "InsufficientInstanceCapacity"}, "t3.micro", "", 2},
		{"next type", map[string]string{"t3.micro " + subnets[0]: "InsufficientInstanceCapacity", "t3.micro " + subnets[1]: "InsufficientInstanceCapacity"}, "t3.small", "", 3},
		{"other error", map[string]string{"t3.micro " + subnets[0]: "InstanceLimitExceeded"}, "", "InstanceLimitExceeded", 1},
		{"none anywhere", map[string]string{
			"t3.micro " + subnets[0]: "InsufficientInstanceCapacity", "t3.micro " + subnets[1]: "InsufficientInstanceCapacity",
			"t3.small " + subnets[0]: "InsufficientInstanceCapacity", "t3.small " + subnets[1]: "InsufficientInstanceCapacity"}, "", "no capacity", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tokens []string
			proxy := faultProxy(t, endpoint, func(form map[string]string) string {
				if form["Action"] != "RunInstances" {
					return ""
				}
				tokens = append(tokens, form["ClientToken"])
				return tc.short[form["InstanceType"]+" "+form["SubnetId"]]
			})
			s, err := New(ctx, Config{Endpoint: proxy, Region: "us-east-1", AMI: base.cfg.AMI,
				InstanceTypes: []string{"t3.micro", "t3.small"}, Subnets: subnets})
			if err != nil {
				t.Fatal(err)
			}
			s.ec2 = ec2.NewFromConfig(mustAWS(t, proxy), func(o *ec2.Options) { o.RetryMaxAttempts = 1 })
			req := request("pond-test-cap-" + strings.ReplaceAll(tc.name, " ", "") + "-0-aaaa")
			g, err := s.Submit(ctx, req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Submit = %v, want an error saying %s", err, tc.wantErr)
				}
				// EC2 refused: nothing started, and the credential is gone.
				if _, err := FetchCredential(ctx, mustAWS(t, endpoint), s.ParameterPath(req.ID), false); err == nil {
					t.Errorf("the credential of a refused launch is still in SSM")
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if len(tokens) != tc.tries {
				t.Fatalf("%d RunInstances, want %d", len(tokens), tc.tries)
			}
			for i := range tokens {
				for j := range i {
					if tokens[i] == tokens[j] {
						t.Errorf("attempts %d and %d share the ClientToken %s", j, i, tokens[i])
					}
				}
			}
			if tc.wantType == "" {
				return
			}
			out, err := s.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{g.SiteID}})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(out.Reservations[0].Instances[0].InstanceType); got != tc.wantType {
				t.Errorf("launched as %s, want %s", got, tc.wantType)
			}
		})
	}
}

func mustAWS(t *testing.T, endpoint string) aws.Config {
	t.Helper()
	ac, err := LoadAWS(context.Background(), "us-east-1", "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return ac
}

// TestSubmitNewSkipsLookup: a Submit marked new (an ID its caller has
// just recorded for the first time) goes straight to RunInstances without
// looking for an earlier launch, the DescribeInstances by tag that an
// emulator answers by scanning every instance. moto ignores ClientToken,
// so the same ID marked new launches again where a retried Submit is told
// ErrDuplicate; EC2 itself would answer with the first instance.
func TestSubmitNewSkipsLookup(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	s := newSite(t, endpoint)
	ctx := context.Background()
	req := request("pond-test-new-0-aaaa")
	req.New = true
	g, err := s.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, request(req.ID)); !errors.Is(err, glidein.ErrDuplicate) {
		t.Fatalf("retried Submit: %v, want ErrDuplicate", err)
	}
	g2, err := s.Submit(ctx, req)
	if err != nil {
		t.Fatalf("Submit marked new: %v, want no lookup and no ErrDuplicate", err)
	}
	if !strings.HasPrefix(g2.SiteID, "i-") {
		t.Fatalf("Submit marked new = %+v (first %s)", g2, g.SiteID)
	}
}

// TestCredentialLayout: a glidein's files are one SSM parameter
// (BundleName) when they are text that fits a parameter (standard tier up
// to 4 KB, advanced up to 8 KB), one a file otherwise, and
// FetchCredential reads both back to the same files.
func TestCredentialLayout(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	s := newSite(t, endpoint)
	ctx := context.Background()
	ac, err := LoadAWS(ctx, "us-east-1", "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	big := request("pond-test-cl-1-bbbb")
	big.Files["big.pem"] = []byte(strings.Repeat("A", 4500) + "\n")
	big.Files["other.pem"] = []byte(strings.Repeat("B", 4500) + "\n")
	mid := request("pond-test-cl-2-cccc")
	mid.Files["big.pem"] = []byte(strings.Repeat("A", 5000) + "\n")
	for _, tc := range []struct {
		req  glidein.Request
		want []string
		tier ssmtypes.ParameterTier
	}{
		{request("pond-test-cl-0-aaaa"), []string{BundleName}, ssmtypes.ParameterTierStandard},
		{mid, []string{BundleName}, ssmtypes.ParameterTierAdvanced},
		{big, []string{"big.pem", "condor_config", "node.key", "node.token", "other.pem"}, ssmtypes.ParameterTierAdvanced},
	} {
		t.Run(tc.req.ID, func(t *testing.T) {
			if _, err := s.putCredential(ctx, tc.req); err != nil {
				t.Fatal(err)
			}
			desc, err := s.ssm.DescribeParameters(ctx, &ssm.DescribeParametersInput{ParameterFilters: []ssmtypes.ParameterStringFilter{
				{Key: aws.String("Path"), Option: aws.String("Recursive"), Values: []string{s.ParameterPath(tc.req.ID)}}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, pm := range desc.Parameters {
				if path.Base(aws.ToString(pm.Name)) == tc.want[0] && pm.Tier != tc.tier {
					t.Errorf("%s: tier %s, want %s", aws.ToString(pm.Name), pm.Tier, tc.tier)
				}
			}
			out, err := s.ssm.GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: aws.String(s.ParameterPath(tc.req.ID))})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range out.Parameters {
				names = append(names, path.Base(aws.ToString(p.Name)))
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.want) {
				t.Errorf("parameters %v, want %v", names, tc.want)
			}
			files, err := FetchCredential(ctx, ac, s.ParameterPath(tc.req.ID), true)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != len(tc.req.Files) {
				t.Errorf("fetched %d files, want %d", len(files), len(tc.req.Files))
			}
			for n, want := range tc.req.Files {
				if !bytes.Equal(files[n], want) {
					t.Errorf("%s = %q, want %q", n, files[n], want)
				}
			}
			if _, err := FetchCredential(ctx, ac, s.ParameterPath(tc.req.ID), false); err == nil {
				t.Error("the credential is still in SSM after a read that deletes it")
			}
		})
	}
}

// FuzzBundle: decodeBundle never panics, and what encodeBundle writes it
// reads back unchanged.
func FuzzBundle(f *testing.F) {
	f.Add("node.token", "SECRET\n", `{"a":"b"}`)
	f.Add("x", "<&>\"\\\u2028", `null`)
	f.Fuzz(func(t *testing.T, name, data, raw string) {
		_, _ = decodeBundle(raw)
		files := map[string][]byte{name: []byte(data), "condor_config": []byte("NUM_SLOTS = 1\n")}
		v, ok := encodeBundle(files)
		if !ok {
			if utf8.ValidString(name) && utf8.ValidString(data) && name != BundleName && len(name)+len(data) < 1000 {
				t.Fatalf("encodeBundle refused %q: %q", name, data)
			}
			return
		}
		got, err := decodeBundle(v)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(files) {
			t.Fatalf("got %d files, want %d", len(got), len(files))
		}
		for n, d := range files {
			if !bytes.Equal(got[n], d) {
				t.Fatalf("%q = %q, want %q", n, got[n], d)
			}
		}
	})
}
