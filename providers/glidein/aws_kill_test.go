package glidein

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
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
	ac, err := ec2.LoadAWS(ctx, ec2test.Region, "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	client := awsec2.NewFromConfig(ac)
	im, err := client.DescribeImages(ctx, &awsec2.DescribeImagesInput{})
	if err != nil || len(im.Images) == 0 {
		t.Fatalf("moto's images: %v", err)
	}
	ami := aws.ToString(im.Images[0].ImageId)
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
// does not honour ClientToken): 20 applies killed with SIGKILL at random
// points; after each, moto's DescribeInstances shows exactly the state's
// instances, one per glidein, and after destroy none but terminated ones.
func TestKillDuringApplyEC2(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 20 applies")
	}
	endpoint := ec2test.StartMoto(t)
	wd := t.TempDir()
	cm := startPool(t, wd)
	killTrials(t, wd, cm, ec2TrialSite(t, endpoint), 20)
}
