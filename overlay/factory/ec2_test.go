package factory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

// TestFactoryEC2 runs the central manager's own factory with an aws entry
// on EC2 (moto), whose instances run their real user data as local
// processes (ec2test.Machines): a job asking more memory than a t3.small
// has makes the factory launch one instance of the cheapest type that
// fits it (t3.medium, not t3.large), and none for a job bigger than any
// type; the instance's agent fetches its credential from SSM, joins the
// pool and runs the job; once the queue holds only the job too big, the
// instance ends itself (idle_timeout), moto shows it terminated, and the
// factory counts its glidein done and launches no other. The instance is
// tagged with the entry's lineage and resource address.
func TestFactoryEC2(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts agents")
	}
	endpoint := ec2test.StartMoto(t)
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

	cfg := &agent.Config{Name: "cm", Role: "cm", Pool: "campus", Bind: "127.0.0.1:0", API: "127.0.0.1:0",
		GossipProfile: "fast", DataDir: t.TempDir(), InsecureAPI: true,
		ConfigFile: fastCondor(t, "DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR SCHEDD\nPOND_FACTORY_INTERVAL = 1s\n")}
	actx, cancel := context.WithCancel(ctx)
	cm, err := agent.New(actx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cm.Run(actx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	site, _ := json.Marshal(ec2.Config{Endpoint: endpoint, Region: ec2test.Region, AMI: ami,
		InstanceTypes: []string{"t3.large", "t3.small", "t3.medium"}, AgentBinary: exe, BaseDir: base})
	entry := fmt.Sprintf(`{"name": "cloud", "site": {"kind": "aws", "config": %s},
		"template": {"cpus": 1, "memory_mb": 512, "lifetime": "10m", "idle_timeout": "3s",
			"agent_args": ["-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-gossip-profile", "fast", "-cm-timeout", "20s"]},
		"limits": {"max_queued": 2, "max_running": 2, "max_instances": 2, "max_hourly_cost": 0.1},
		"lineage": "4f1c8e2a-0d4b-4b7e-9c1e-3a2b1c0d9e8f", "address": "glidein.cloud"}`, site)
	req, _ := http.NewRequest("PUT", "http://"+cm.APIAddr()+api.PathFactoryEntries+"cloud", strings.NewReader(entry))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT the entry: %d %s", resp.StatusCode, body)
	}

	machines := ec2test.NewMachines(t, endpoint)
	machines.Run(300 * time.Millisecond)
	// One job too big for any type, then one a t3.medium fits.
	submitJobs(t, cm, 1, 1, 64000)
	submitJobs(t, cm, 1, 2, 3000)

	instances := func() []types.Instance {
		out, err := client.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{})
		if err != nil {
			t.Fatal(err)
		}
		var all []types.Instance
		for _, r := range out.Reservations {
			all = append(all, r.Instances...)
		}
		return all
	}
	status := func() api.FactoryEntry {
		resp, err := http.Get("http://" + cm.APIAddr() + api.PathFactory)
		if err != nil {
			return api.FactoryEntry{}
		}
		defer resp.Body.Close()
		var st struct{ Entries []api.FactoryEntry }
		json.NewDecoder(resp.Body).Decode(&st)
		for _, e := range st.Entries {
			if e.Name == "cloud" {
				return e
			}
		}
		return api.FactoryEntry{}
	}
	var ranOn string
	waitFor(t, 60*time.Second, "the job runs and completes on an instance", func() error {
		h, err := wire.NewSchedd(cm.APIAddr(), "").History(ctx, &wire.QueryJobsRequest{})
		if err != nil {
			return err
		}
		for _, j := range h {
			if j.Ad["RequestMemory"] == "3000" && j.Ad["JobStatus"] == "4" {
				ranOn = j.Ad["LastRemoteHost"] + j.Ad["RemoteHost"]
				return nil
			}
		}
		return fmt.Errorf("history %v, queue %v, instances %d, factory %+v%s", h, queue(t, cm), len(instances()), status(), machines.Logs(10))
	})
	if !strings.Contains(ranOn, "pond-campus-cloud-") {
		t.Errorf("the job ran on %q, want the instance's glidein", ranOn)
	}
	all := instances()
	if len(all) != 1 || all[0].InstanceType != "t3.medium" {
		var got []string
		for _, in := range all {
			got = append(got, string(in.InstanceType))
		}
		t.Fatalf("instances launched %q, want one t3.medium", got)
	}
	// Tagged with the entry's lineage and address, as pondctl tags what
	// it launches itself.
	tags := map[string]string{}
	for _, tg := range all[0].Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	for k, v := range map[string]string{ec2.TagManagedBy: ec2.ManagedBy, ec2.TagLineage: "4f1c8e2a-0d4b-4b7e-9c1e-3a2b1c0d9e8f",
		ec2.TagAddress: "glidein.cloud"} {
		if tags[k] != v {
			t.Errorf("the instance's tag %s = %q, want %q (tags %v)", k, tags[k], v, tags)
		}
	}
	waitFor(t, 40*time.Second, "the idle instance ends itself and is terminated", func() error {
		in := instances()[0]
		if in.State.Name != types.InstanceStateNameTerminated {
			return fmt.Errorf("instance %s is %s", aws.ToString(in.InstanceId), in.State.Name)
		}
		// moto says an instance that shut itself down was terminated by
		// its user (ec2test.Machines terminates it): the factory counts
		// its glidein lost there, done on EC2.
		if fn := status().Funnel; fn.Done+fn.Lost != 1 || fn.Requested != 1 {
			return fmt.Errorf("funnel %+v, want 1 requested and ended", fn)
		}
		return nil
	})
	// It ended because it was idle, by itself.
	id := aws.ToString(instances()[0].Tags[0].Value)
	for _, tag := range instances()[0].Tags {
		if aws.ToString(tag.Key) == ec2.TagID {
			id = aws.ToString(tag.Value)
		}
	}
	waitFor(t, 10*time.Second, "the glidein's status file says idle", func() error {
		data, err := os.ReadFile(filepath.Join(base, id, "glidein.status"))
		if err != nil || !strings.Contains(string(data), `"idle"`) {
			return fmt.Errorf("%s (%v)", data, err)
		}
		return nil
	})
	// The job too big for any type is still idle, and starts nothing.
	time.Sleep(3 * time.Second)
	if q := queue(t, cm); q["1"] != 1 {
		t.Errorf("queue %v: want the big job idle", q)
	}
	if n := len(instances()); n != 1 {
		t.Errorf("%d instances launched, want 1: none for the job too big", n)
	}
	if e := status(); len(e.Offers) != 3 || e.Offers[0].Name != "t3.small" || !e.Offers[0].Priced {
		t.Errorf("offers %+v: want the three types, t3.small first with its price", e.Offers)
	}
}
