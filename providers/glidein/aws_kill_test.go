package glidein

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
	"github.com/zclconf/go-cty/cty"
)

// Environment of an apply child of the EC2 kill trials.
const (
	childEndpoint = "POND_TEST_AWS_ENDPOINT"
	childAMI      = "POND_TEST_AWS_AMI"
)

func init() {
	trialSites["aws"] = func(getenv func(string) string) (site.Site, error) {
		return ec2.New(context.Background(), ec2.Config{Endpoint: getenv(childEndpoint), Region: ec2test.Region,
			AMI: getenv(childAMI), InstanceTypes: []string{"t3.micro"}})
	}
}

// ec2TrialSite is an EC2 site on moto at endpoint for the kill trials:
// what runs is what moto's DescribeInstances says is not terminated,
// whatever its tags' prefix, and killing a glidein terminates its
// instance behind pond's back.
func ec2TrialSite(t *testing.T, endpoint string) trialSite {
	ctx := context.Background()
	_, client, ami := motoEC2(t, endpoint)
	s, err := ec2.New(ctx, ec2.Config{Endpoint: endpoint, Region: ec2test.Region, AMI: ami, InstanceTypes: []string{"t3.micro"}})
	if err != nil {
		t.Fatal(err)
	}
	live := func(t testing.TB) map[string][]string {
		out, err := client.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{})
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string][]string{}
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				if in.State != nil && in.State.Name == types.InstanceStateNameTerminated {
					continue
				}
				id := ""
				for _, tag := range in.Tags {
					if aws.ToString(tag.Key) == ec2.TagID {
						id = aws.ToString(tag.Value)
					}
				}
				byID[id] = append(byID[id], aws.ToString(in.InstanceId))
			}
		}
		return byID
	}
	return trialSite{Site: s,
		env: []string{childSiteKind + "=aws", childEndpoint + "=" + endpoint, childAMI + "=" + ami},
		running: func(t testing.TB) []string {
			var ids []string
			for id, insts := range live(t) {
				if len(insts) != 1 {
					t.Errorf("glidein %q runs as %d instances: %v", id, len(insts), insts)
				}
				ids = append(ids, id)
			}
			slices.Sort(ids)
			return ids
		},
		kill: func(t testing.TB, id string) {
			if insts := live(t)[id]; len(insts) > 0 {
				if _, err := client.TerminateInstances(ctx, &awsec2.TerminateInstancesInput{InstanceIds: insts}); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
}

// TestKillDuringApplyEC2 runs the kill trials against EC2 (moto, which
// does not honour ClientToken): 10 applies killed with SIGKILL at random
// points; after each, moto's DescribeInstances shows exactly the state's
// instances, one per glidein, and after destroy none but terminated ones.
func TestKillDuringApplyEC2(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills 10 applies")
	}
	endpoint := ec2test.Shared(t)
	wd := t.TempDir()
	cm := startPool(t, wd)
	killTrials(t, wd, cm, ec2TrialSite(t, endpoint), 10)
}

// TestKillDuringDestroyEC2 kills a pondctl destroying a glidein resource
// on EC2 (moto) with SIGKILL at random points, 10 times: the next destroy
// (of a state that the killed run never wrote, so found again by the
// journal and the tags) leaves no instance running, and no credential in
// SSM.
func TestKillDuringDestroyEC2(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills 10 destroys")
	}
	endpoint := ec2test.Shared(t)
	wd := t.TempDir()
	cm := startPool(t, wd)
	s := ec2TrialSite(t, endpoint)
	p := configured(t, wd, s, nil)
	ac, err := ec2.LoadAWS(context.Background(), ec2test.Region, "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ssmClient := ssm.NewFromConfig(ac)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	const trials = 10
	finished := 0
	for trial := range trials {
		n := 1 + rng.IntN(4)
		delay := time.Duration(rng.IntN(80)) * time.Millisecond
		if killedChild(t, wd, s, cm, n, delay, true) {
			finished++
		}
		// The next run: what the killed one left is adopted, then destroyed.
		state, err := applyConfig(t, p, crashAddr, cty.NullVal(glideinSchema().ImpliedType()),
			glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "nodes": cty.NumberIntVal(int64(n))}), nil)
		if err != nil {
			t.Fatalf("trial %d: apply after the killed destroy: %v", trial, err)
		}
		if got := s.running(t); len(got) != n {
			t.Fatalf("trial %d (nodes %d, killed after %s): %d instances live after apply, want %d: %v", trial, n, delay, len(got), n, got)
		}
		destroyAll(t, p, crashAddr, state)
		if got := s.running(t); len(got) != 0 {
			t.Fatalf("trial %d (nodes %d, killed after %s): after destroy, instances still live: %v", trial, n, delay, got)
		}
		left, err := ssmClient.GetParametersByPath(context.Background(), &ssm.GetParametersByPathInput{Path: aws.String("/pond"), Recursive: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if len(left.Parameters) > 0 {
			t.Fatalf("trial %d: after destroy, SSM still holds %s", trial, aws.ToString(left.Parameters[0].Name))
		}
	}
	t.Logf("%d of %d killed destroys had finished", finished, trials)
}
