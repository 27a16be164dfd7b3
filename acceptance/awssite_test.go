package acceptance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

// EC2 (moto) is a glidein site of the acceptance tests too: its
// instances are not booted (an apply waits only until EC2 says they
// run), so TestGlideinKilledApply checks exactly-once launching with the
// real pondctl killed mid-apply.
func init() {
	glideinSites["aws"] = startAWSSite
}

// startAWSSite starts moto and returns it as a glidein site whose running
// glideins are the instances tagged pond:id that EC2 does not say are
// terminated; every one of them must carry pond:managed-by = pondctl, a
// pond:lineage (the same for all) and pond:address.
func startAWSSite(t *testing.T) glideinSite {
	endpoint, client, ami := startMoto(t)
	ctx := context.Background()
	live := func(t testing.TB) []types.Instance {
		t.Helper()
		out, err := client.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{Filters: []types.Filter{
			{Name: aws.String("tag-key"), Values: []string{ec2.TagID}}}})
		if err != nil {
			t.Fatal(err)
		}
		var ins []types.Instance
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				if in.State == nil || in.State.Name != types.InstanceStateNameTerminated {
					ins = append(ins, in)
				}
			}
		}
		return ins
	}
	tag := func(in types.Instance, key string) string {
		for _, tg := range in.Tags {
			if aws.ToString(tg.Key) == key {
				return aws.ToString(tg.Value)
			}
		}
		return ""
	}
	return glideinSite{
		kind: "aws",
		provider: fmt.Sprintf(`provider "aws" {
  endpoint       = %q
  region         = %q
  ami            = %q
  instance_types = ["t3.micro"]
  bind_address   = "127.0.0.1"
}`, endpoint, ec2test.Region, ami),
		running: func(t testing.TB) []string {
			t.Helper()
			var ids []string
			lineages := map[string]bool{}
			for _, in := range live(t) {
				ids = append(ids, tag(in, ec2.TagID))
				lineages[tag(in, ec2.TagLineage)] = true
				if tag(in, ec2.TagManagedBy) != ec2.ManagedBy || tag(in, ec2.TagLineage) == "" || tag(in, ec2.TagAddress) == "" {
					t.Errorf("instance %s of %s: tags %v, want pond:managed-by = pondctl, pond:lineage and pond:address",
						aws.ToString(in.InstanceId), tag(in, ec2.TagID), in.Tags)
				}
			}
			if len(lineages) > 1 {
				t.Errorf("the instances carry %d lineages: %v", len(lineages), lineages)
			}
			return ids
		},
		kill: func(t testing.TB, id string) {
			t.Helper()
			var ids []string
			for _, in := range live(t) {
				if tag(in, ec2.TagID) == id {
					ids = append(ids, aws.ToString(in.InstanceId))
				}
			}
			if len(ids) == 0 {
				return
			}
			if _, err := client.TerminateInstances(ctx, &awsec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
				t.Fatal(err)
			}
		},
		describe: func(t testing.TB) string {
			var lines []string
			for _, in := range live(t) {
				lines = append(lines, fmt.Sprintf("%s %s %s lineage=%s", aws.ToString(in.InstanceId), tag(in, ec2.TagID),
					in.State.Name, tag(in, ec2.TagLineage)))
			}
			sort.Strings(lines)
			return strings.Join(lines, "\n")
		},
	}
}
