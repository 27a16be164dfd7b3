package glidein

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

// TestOtherLineageLeftAlone puts four instances on moto under one
// resource's ID prefix: one tagged with the state's lineage, one with no
// lineage (launched before instances carried it), one with another
// state's lineage (a copy of the working directory with a state of its
// own), none of them in the journal; and one of another lineage that the
// journal records (sent by a first apply killed before it wrote its
// state). Refresh and destroy adopt and end all but the third, which they
// never touch, and the fourth is labelled with the state's lineage; a run
// that does not know its lineage (an older planner) keeps the old
// behaviour.
func TestOtherLineageLeftAlone(t *testing.T) {
	t.Parallel()
	endpoint := ec2test.Shared(t)
	ctx := context.Background()
	_, client, ami := motoEC2(t, endpoint)
	s, err := ec2.New(ctx, ec2.Config{Endpoint: endpoint, Region: ec2test.Region, AMI: ami, InstanceTypes: []string{"t3.micro"}})
	if err != nil {
		t.Fatal(err)
	}
	wd := t.TempDir()
	p := configured(t, wd, s, nil)
	const addr, mine, theirs = "glidein.burst", "lineage-mine", "lineage-theirs"
	prefix, err := p.prefixFor(addr)
	if err != nil {
		t.Fatal(err)
	}
	launch := func(index int, lineage string) string {
		req := site.Request{ID: newID(prefix, index), Args: []string{"agent"}, Files: map[string][]byte{"f": []byte("x")},
			Lineage: lineage, Address: addr}
		g, err := s.Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return g.ID
	}
	ours, old, foreign, killed := launch(0, mine), launch(1, ""), launch(2, theirs), launch(3, "lineage-never-written")
	if err := p.journal.write(&record{ID: killed, Address: addr, Prefix: prefix, Index: 3, State: recIntent, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}

	// Refresh: the resource shows its own and the untagged, not the other's.
	cur := stateOf(glideinConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(3)}), prefix, nil, nil)
	rr := p.ReadResource(ctx, providers.ReadRequest{TypeName: ResourceType, Address: addr, Lineage: mine, Current: cur})
	if err := providers.Err(rr.Diagnostics); err != nil {
		t.Fatal(err)
	}
	got := ids(rr.New)
	slices.Sort(got)
	want := []string{ours, old, killed}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("refresh with lineage %s: ids %v, want %v (not %s)", mine, got, want, foreign)
	}

	// Without a lineage (an older planner), every instance of the prefix.
	other := configured(t, t.TempDir(), s, nil)
	rr = other.ReadResource(ctx, providers.ReadRequest{TypeName: ResourceType, Address: addr, Current: cur})
	if n := len(ids(rr.New)); n != 4 {
		t.Fatalf("refresh without a lineage: %d ids, want all 4", n)
	}

	// The journal's instance now carries the state's lineage.
	gs, err := s.List(ctx, killed)
	if err != nil || len(gs) != 1 || gs[0].Lineage != mine {
		t.Fatalf("the journal's instance after refresh: %+v, %v; want lineage %s", gs, err, mine)
	}

	// Destroy ends all but the other state's.
	resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: ResourceType, Address: addr, Lineage: mine,
		Prior: rr.New, Planned: cty.NullVal(rr.New.Type()), Config: cty.NullVal(rr.New.Type())})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	out, err := client.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("tag:" + ec2.TagManagedBy), Values: []string{ec2.ManagedBy}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			id := ""
			for _, tg := range in.Tags {
				if aws.ToString(tg.Key) == ec2.TagID {
					id = aws.ToString(tg.Value)
				}
			}
			if in.State.Name != types.InstanceStateNameTerminated && in.State.Name != types.InstanceStateNameShuttingDown {
				live[id] = true
			}
		}
	}
	if live[ours] || live[old] || live[killed] || !live[foreign] {
		t.Fatalf("after destroy, live: %v; want only %s (another state's)", live, foreign)
	}
}
