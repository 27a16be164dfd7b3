package glidein

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

// TestFactoryEC2Entry drives a glidein resource of the aws provider with
// a factory block against moto: plan takes the block and estimates what
// the entry may cost at most; apply installs an aws entry, with the
// resource's max_instances and max_hourly_cost and no AWS credential, in
// the pilot factory of the pool's central manager, with the state's
// lineage and the resource's address, which tag its instances; a job asking more
// memory than a t3.small has makes that factory launch a t3.medium, and
// no more than max_instances; destroy removes the entry and terminates
// the instance by its ID, which moto then shows terminated.
func TestFactoryEC2Entry(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts agents")
	}
	endpoint := ec2test.Shared(t) // before the pool: its factory reads the same credentials
	ctx := context.Background()
	wd := t.TempDir()
	cm := startFactoryPool(t, wd)
	_, client, ami := motoEC2(t, endpoint)
	s, err := ec2.New(ctx, ec2.Config{Endpoint: endpoint, Region: ec2test.Region, AMI: ami,
		InstanceTypes: []string{"t3.large", "t3.small", "t3.medium"}, AgentBinary: selfBinary(), BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := configured(t, wd, s, nil)
	cfg := glideinConfig(map[string]cty.Value{"pool": cty.StringVal(cm), "lifetime": cty.StringVal("10m"),
		"idle_timeout": cty.StringVal("20s"), "max_instances": cty.NumberIntVal(1), "max_hourly_cost": cty.NumberFloatVal(0.5),
		"factory": factoryBlock(map[string]cty.Value{"max_queued": cty.NumberIntVal(2), "max_running": cty.NumberIntVal(3),
			"ramp": cty.StringVal("none")})})
	const addr = "glidein.cloud"
	null := cty.NullVal(cfg.Type())
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: ResourceType, Address: addr, Prior: null, Config: cfg,
		ProposedNew: providertest.ProposedNew(glideinSchema(), null, cfg)})
	if err := providers.Err(plan.Diagnostics); err != nil {
		t.Fatalf("plan of an aws factory block: %v", err)
	}
	if c := plan.Cost; c == nil || c.Instances != 1 || c.Starts != 0 || c.HourlyCost != 0.0832 {
		t.Errorf("cost estimate %+v: want at most 1 instance at the dearest type's $0.0832/h, none started by apply", c)
	}
	const lineage = "0b6c1a9e-5f2d-4c8e-a7b3-9d1e2f3a4b5c"
	applied := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: ResourceType, Address: addr, Lineage: lineage,
		Prior: null, Planned: plan.Planned, Config: cfg})
	if err := providers.Err(applied.Diagnostics); err != nil {
		t.Fatal(err)
	}
	state := applied.New
	admin, err := p.adminClient(cm)
	if err != nil {
		t.Fatal(err)
	}
	st, err := admin.Factory(ctx)
	if err != nil || len(st.Entries) != 1 {
		t.Fatalf("the factory's entries: %+v (%v)", st, err)
	}
	data, _ := json.Marshal(st.Entries[0].Config)
	e, err := api.ParseFactoryEntry(data)
	if err != nil {
		t.Fatal(err)
	}
	if e.Site.Kind != "aws" || e.Limits.MaxInstances != 1 || e.Limits.MaxHourlyCost != 0.5 || e.Lineage != lineage || e.Address != addr {
		t.Fatalf("the entry: %+v", e)
	}
	for _, secret := range []string{"SecretAccessKey", "AWS_SECRET", `"` + os.Getenv("AWS_SECRET_ACCESS_KEY") + `"`} {
		if strings.Contains(string(e.Site.Config), secret) {
			t.Errorf("the entry's site carries %q: %s", secret, e.Site.Config)
		}
	}

	// Two jobs too big for a t3.small, which only a glidein runs (not the
	// pool's own node): one t3.medium each, but max_instances 1.
	sub := filepath.Join(wd, "job.sub")
	os.WriteFile(sub, []byte("executable = /bin/sleep\narguments = 30\ntransfer_executable = false\nrequest_memory = 3000\nrequirements = IsGlidein =?= true\nqueue 2\n"), 0o600)
	var out, errOut strings.Builder
	if code := tools.Submit(ctx, []string{"-pool", cm, sub}, &out, &errOut, []string{"PWD=" + wd}); code != 0 {
		t.Fatalf("submit: %s%s", out.String(), errOut.String())
	}
	live := func() []types.Instance {
		o, err := client.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{})
		if err != nil {
			t.Fatal(err)
		}
		var all []types.Instance
		for _, r := range o.Reservations {
			all = append(all, r.Instances...)
		}
		return all
	}
	deadline := time.Now().Add(40 * time.Second)
	for len(live()) == 0 {
		if time.Now().After(deadline) {
			st, _ := admin.Factory(ctx)
			t.Fatalf("no instance launched for the waiting jobs: %+v", st)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var capped string
	deadline = time.Now().Add(20 * time.Second)
	for capped == "" && time.Now().Before(deadline) {
		st, _ := admin.Factory(ctx)
		if st != nil && len(st.Entries) == 1 {
			capped = st.Entries[0].Capped
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !strings.Contains(capped, "max_instances 1") {
		t.Errorf("the entry's capped reason %q, want max_instances 1", capped)
	}
	// Refresh shows it in the resource's funnel.
	resp := p.ReadResource(ctx, providers.ReadRequest{TypeName: ResourceType, Address: addr, Lineage: lineage, Current: state})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	if len(resp.Diagnostics) > 0 || getString(resp.New, "entry") == "" {
		t.Errorf("refresh of the entry apply installed: entry %q, %v", getString(resp.New, "entry"), resp.Diagnostics)
	}
	if f := resp.New.GetAttr("funnel"); f.IsNull() || !strings.Contains(f.GetAttr("capped").AsString(), "max_instances 1") {
		t.Errorf("funnel %#v: want capped by max_instances 1", f)
	}
	state = resp.New
	all := live()
	if len(all) != 1 || all[0].InstanceType != "t3.medium" {
		t.Fatalf("instances %+v, want one t3.medium", all)
	}
	id := aws.ToString(all[0].InstanceId)
	tags := map[string]string{}
	for _, tg := range all[0].Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if tags[ec2.TagLineage] != lineage || tags[ec2.TagAddress] != addr || tags[ec2.TagManagedBy] != ec2.ManagedBy {
		t.Errorf("the factory's instance is tagged %v, want the state's lineage %s and the address %s", tags, lineage, addr)
	}

	destroyAll(t, p, addr, state)
	if st, err := admin.Factory(ctx); err != nil || len(st.Entries) != 0 {
		t.Errorf("after destroy, the factory's entries: %+v (%v)", st, err)
	}
	for _, in := range live() {
		if aws.ToString(in.InstanceId) == id && in.State.Name != types.InstanceStateNameTerminated {
			t.Errorf("after destroy, instance %s is %s", id, in.State.Name)
		}
	}
}
