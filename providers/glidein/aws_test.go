package glidein

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
	"github.com/zclconf/go-cty/cty"
)

// TestEC2InstancesJoinPool launches two glideins on EC2 (moto) and runs
// each instance's real user data as a local process: the agent fetches
// its credential from SSM with -credentials, joins the pool with its own
// token and certificate, and the credential is gone from SSM. Destroy
// terminates the instances, and their agents are gone.
func TestEC2InstancesJoinPool(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts agents")
	}
	endpoint := ec2test.Shared(t)
	ctx := context.Background()
	wd := t.TempDir()
	cm := startPool(t, wd)
	ac, _, ami := motoEC2(t, endpoint)
	s, err := ec2.New(ctx, ec2.Config{Endpoint: endpoint, Region: ec2test.Region, AMI: ami,
		InstanceTypes: []string{"t3.micro"}, AgentBinary: selfBinary(), BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := configured(t, wd, s, nil)
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(2)})
	state, err := applyConfig(t, p, "glidein.burst", cty.NullVal(cfg.Type()), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := ids(state)
	// A real glidein's credential (token, certificate, key, CA, trusted
	// keys, configuration) fits one standard-tier parameter: one
	// PutParameter a launch.
	for _, id := range want {
		out, err := ssm.NewFromConfig(ac).GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: aws.String(s.ParameterPath(id))})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Parameters) != 1 || path.Base(aws.ToString(out.Parameters[0].Name)) != ec2.BundleName {
			var names []string
			for _, p := range out.Parameters {
				names = append(names, aws.ToString(p.Name))
			}
			t.Errorf("the credential of %s is in SSM as %v, want one parameter %s", id, names, ec2.BundleName)
		}
	}
	machines := ec2test.NewMachines(t, endpoint)
	if err := machines.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := p.client(cm)
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
			t.Fatalf("%d of the instances' glideins %v joined pool campus (%v)%s", joined, want, err, machines.Logs(15))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Each agent read its credential once: SSM has it no more.
	for _, id := range want {
		if _, err := ec2.FetchCredential(ctx, ac, s.ParameterPath(id), false); err == nil {
			t.Errorf("the credential of %s is still in SSM after its agent started", id)
		}
	}
	destroyAll(t, p, "glidein.burst", state)
	if err := machines.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	gs, err := s.List(ctx, state.GetAttr("id").AsString())
	if err != nil || anyLive(gs) {
		t.Errorf("after destroy, EC2 lists %v (%v)", gs, err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		ms, _ := c.Members(ctx, api.MembersFilter{Status: api.StatusAlive})
		left := 0
		for _, m := range ms {
			if slices.Contains(want, m.Name) {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d glideins still alive in the pool after destroy", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestEC2IdleInstanceEndsItself: an instance whose glidein has no job for
// its idle_timeout ends its agent, shuts down and is terminated, and EC2
// then lists it as done (ended by itself).
func TestEC2IdleInstanceEndsItself(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts agents")
	}
	endpoint := ec2test.Shared(t)
	ctx := context.Background()
	wd := t.TempDir()
	cm := startPool(t, wd)
	_, _, ami := motoEC2(t, endpoint)
	base := t.TempDir()
	s, err := ec2.New(ctx, ec2.Config{Endpoint: endpoint, Region: ec2test.Region, AMI: ami,
		InstanceTypes: []string{"t3.micro"}, AgentBinary: selfBinary(), BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	p := configured(t, wd, s, nil)
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(1), "idle_timeout": cty.StringVal("3s")})
	state, err := applyConfig(t, p, "glidein.idle", cty.NullVal(cfg.Type()), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	machines := ec2test.NewMachines(t, endpoint)
	if err := machines.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	prefix := state.GetAttr("id").AsString()
	deadline := time.Now().Add(60 * time.Second)
	for {
		gs, err := s.List(ctx, prefix)
		if err == nil && len(gs) == 1 && gs[0].State.Ended() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle instance did not end: %+v (%v)%s", gs, err, machines.Logs(15))
		}
		time.Sleep(300 * time.Millisecond)
	}
	id := ids(state)[0]
	status, err := os.ReadFile(filepath.Join(base, id, "glidein.status"))
	if err != nil || !strings.Contains(string(status), `"idle"`) {
		t.Errorf("the glidein's status file does not say it ended idle: %s (%v)", status, err)
	}
	destroyAll(t, p, "glidein.idle", state)
}

// motoEC2 returns the SDK configuration of moto at endpoint, a client of
// its EC2 and the ID of an image it offers.
func motoEC2(t *testing.T, endpoint string) (aws.Config, *awsec2.Client, string) {
	t.Helper()
	ac, err := ec2.LoadAWS(context.Background(), ec2test.Region, "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	client := awsec2.NewFromConfig(ac)
	im, err := client.DescribeImages(context.Background(), &awsec2.DescribeImagesInput{})
	if err != nil || len(im.Images) == 0 {
		t.Fatalf("moto's images: %v", err)
	}
	return ac, client, aws.ToString(im.Images[0].ImageId)
}
