package ec2

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestInstanceTags launches a glidein on moto and reads its instance's and
// volume's tags back from EC2: the owner's tags (pond:managed-by = pondctl,
// the state lineage, the resource address, pond:id) and the user's; List
// reports the lineage.
func TestInstanceTags(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	s := newSite(t, endpoint)
	s.cfg.Tags = map[string]string{"Project": "burst"}
	ctx := context.Background()
	req := request("pond-test-tg-0-aaaa")
	req.Lineage, req.Address = "3f1c2f0e-7a0b-4bd5-9e54-0d1e6b1d2c3a", "glidein.burst"
	g, err := s.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"pond:id": req.ID, "pond:managed-by": "pondctl", "pond:lineage": req.Lineage,
		"pond:address": "glidein.burst", "Name": req.ID, "Project": "burst",
	}
	// Instances are found by the owner's tags, as an operator looks for them.
	out, err := s.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("tag:pond:managed-by"), Values: []string{"pondctl"}},
		{Name: aws.String("tag:pond:lineage"), Values: []string{req.Lineage}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("instances tagged with the lineage: %+v, want one", out.Reservations)
	}
	in := out.Reservations[0].Instances[0]
	if aws.ToString(in.InstanceId) != g.SiteID {
		t.Fatalf("found %s, launched %s", aws.ToString(in.InstanceId), g.SiteID)
	}
	for k, v := range want {
		if got := tagValue(in.Tags, k); got != v {
			t.Errorf("instance tag %s = %q, want %q", k, got, v)
		}
	}
	vols, err := s.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{Filters: []types.Filter{
		{Name: aws.String("tag:pond:id"), Values: []string{req.ID}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols.Volumes {
		if got := tagValue(v.Tags, TagLineage); got != req.Lineage {
			t.Errorf("volume %s: tag pond:lineage = %q, want %q", aws.ToString(v.VolumeId), got, req.Lineage)
		}
	}
	list, err := s.List(ctx, "pond-test-tg-")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Lineage != req.Lineage {
		t.Fatalf("List = %+v, want one glidein of lineage %s", list, req.Lineage)
	}
}

// TestInstanceTagsTable covers the tags of requests without an owner, a
// user's Name and a long address, without EC2.
func TestInstanceTagsTable(t *testing.T) {
	t.Parallel()
	long := "glidein.burst[\"" + strings.Repeat("é", 200) + "\"]"
	for _, tt := range []struct {
		name     string
		userTags map[string]string
		lineage  string
		address  string
		want     map[string]string
		absent   []string
	}{
		{name: "no owner", want: map[string]string{"pond:id": "pond-x-0-a", "pond:managed-by": "pondctl", "Name": "pond-x-0-a"},
			absent: []string{"pond:lineage", "pond:address"}},
		{name: "user's name", userTags: map[string]string{"Name": "burst"}, lineage: "L", address: "glidein.b",
			want: map[string]string{"Name": "burst", "pond:lineage": "L", "pond:address": "glidein.b"}},
		{name: "long address", address: long, want: map[string]string{"pond:address": truncate(long)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &Site{cfg: Config{Tags: tt.userTags}}
			req := request("pond-x-0-a")
			req.Lineage, req.Address = tt.lineage, tt.address
			tags := s.instanceTags(req)
			for k, v := range tt.want {
				if got := tagValue(tags, k); got != v {
					t.Errorf("tag %s = %q, want %q", k, got, v)
				}
			}
			for _, k := range tt.absent {
				if got := tagValue(tags, k); got != "" {
					t.Errorf("tag %s = %q, want none", k, got)
				}
			}
			for _, tg := range tags {
				if v := aws.ToString(tg.Value); len(v) > maxTagValue || !utf8.ValidString(v) {
					t.Errorf("tag %s: %d bytes, valid UTF-8 %v; EC2 takes at most %d", aws.ToString(tg.Key), len(v), utf8.ValidString(v), maxTagValue)
				}
			}
			if a := tagValue(tags, TagAddress); tt.address != "" && (a == "" || !strings.HasPrefix(tt.address, a)) {
				t.Errorf("tag pond:address %q is not a prefix of the address %q", a, tt.address)
			}
		})
	}
}
