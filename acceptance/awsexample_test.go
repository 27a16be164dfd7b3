package acceptance

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

// awsJob runs on a cloud node of examples/aws for a while.
const awsJob = `executable          = /bin/sleep
arguments           = 12
transfer_executable = false
requirements        = IsGlidein =?= true && Site == "aws"
request_memory      = 16
log                 = job.log
queue
`

// TestAWSExample runs examples/aws end to end with the real pondctl, moto
// as EC2 and SSM, and each launched instance's real user data run as a
// local process (ec2test.Machines), each instance with a metadata service
// of its own (amazon-ec2-metadata-mock, started when the test interrupts
// that instance):
//
// plan shows the instance types → apply launches the instances, tagged
// with pond:managed-by, the state's lineage and the resource's address,
// and they bootstrap (credential from SSM) and join the pool → a job runs
// on a cloud node → a spot interruption notice drains that node at once
// (the job goes back to the queue; the glidein's status says why) and its
// instance ends → the next apply replaces it, and the job runs again and
// finishes → idle, every node ends itself and its instance terminates →
// apply launches the count again, and destroy terminates them: no
// instance left running (DescribeInstances).
func TestAWSExample(t *testing.T) {
	t.Parallel()
	endpoint, client, ami := startMoto(t)

	w := newWorkdir(t, "aws")
	base := t.TempDir() // the instances' /var/lib/pond
	// Only endpoint names moto; the others point the image's paths at
	// this machine and shorten the idle timeout for the test.
	vars := []string{"-var=endpoint=" + endpoint, "-var=nodes=2", "-var=ami=" + ami,
		"-var=agent_binary=" + pondBin, "-var=base_dir=" + base, "-var=idle_timeout=15s"}
	if strings.Contains(readFile(t, filepath.Join(w.dir, "main.pond.hcl")), `variable "gossip_key"`) {
		// An example that still asks for the sea's key.
		vars = append(vars, "-var=gossip_key="+strings.TrimSpace(w.expect(0, "sea", "keygen").stdout))
	}
	cmd := func(args ...string) []string { return append(args, vars...) }

	// Each instance's metadata service: nothing listens there until the
	// test sends that instance a notice.
	var (
		mu   sync.Mutex
		imds = map[string]string{} // instance ID -> HOST:PORT
	)
	machines := ec2test.NewMachines(t, endpoint)
	machines.Env = func(id string) []string {
		mu.Lock()
		defer mu.Unlock()
		imds[id] = ec2test.FreeAddr(t)
		return []string{"AWS_EC2_METADATA_SERVICE_ENDPOINT=http://" + imds[id]}
	}
	defer func() {
		if t.Failed() {
			t.Logf("the instances' user data:%s", machines.Logs(20))
		}
	}()
	machines.Run(300 * time.Millisecond)

	began := time.Now()
	r := w.expect(0, cmd("plan")...)
	for _, it := range []string{"c7i.large", "c6i.large", "m7i.large"} {
		if !strings.Contains(r.stdout, it) {
			t.Fatalf("plan does not show the instance type %s:\n%s", it, r.stdout)
		}
	}
	t.Logf("plan: %s", time.Since(began).Round(time.Millisecond))
	applied := time.Now()
	w.expect(0, cmd("apply", "-auto-approve")...)
	t.Logf("apply (the pool and two instances launched): %s", time.Since(applied).Round(time.Millisecond))
	cm := w.output("central_manager")
	first := awsInstanceIDs(t, w)
	if len(first) != 2 {
		t.Fatalf("after apply, instance_ids = %v, want 2", first)
	}
	lineage := stateLineage(t, w)
	live := liveInstances(t, client)
	for _, id := range first {
		tags, ok := live[id]
		if !ok {
			t.Fatalf("%s is in instance_ids but EC2 has no live instance %s: %v", id, id, live)
		}
		for k, v := range map[string]string{"pond:managed-by": "pondctl", "pond:lineage": lineage, "pond:address": "glidein.burst"} {
			if tags[k] != v {
				t.Errorf("instance %s: tag %s = %q, want %q (tags %v)", id, k, tags[k], v, tags)
			}
		}
	}
	glideins := awsGlideins(t, w)
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-af", "Name", "IsGlidein", "Site")
		for _, g := range glideins {
			if !strings.Contains(r.stdout, "@"+g.ID+" true aws") {
				return fmt.Errorf("no slot of %s (%s) in the pool:\n%s", g.ID, g.SiteID, r)
			}
		}
		return nil
	})
	t.Logf("apply to both cloud nodes' slots in the pool: %s", time.Since(applied).Round(time.Millisecond))

	// Its first run lasts until the spot notice evicts it, however long a
	// loaded machine takes to start the notice's metadata service and the
	// glidein to poll it (a run of a fixed 12 s could end first, and the
	// drain then had nothing to evict); its second run, after the
	// eviction, is short. The job's ad counts its earlier starts.
	w.write("job.sub", strings.Replace(strings.Replace(awsJob, "/bin/sleep", "/bin/sh", 1), "arguments           = 12",
		`arguments           = "-c 'if grep -q ""^NumJobStarts = 0$"" ""$_CONDOR_JOB_AD""; then sleep 300; else sleep 2; fi'"`, 1))
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
	var busy awsGlidein
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "RemoteHost")
		for _, g := range glideins {
			if strings.Contains(r.stdout, "@"+g.ID) {
				busy = g
				return nil
			}
		}
		return fmt.Errorf("the job runs on none of the cloud nodes %v: %s", glideins, r)
	})
	// Matched to a node is not yet running there: the notice must find
	// the job started (its execute event written once the startd took it).
	eventually(t, 30*time.Second, func() error {
		if data := readFile(t, filepath.Join(w.dir, "job.log")); !strings.Contains(data, "001 (") {
			return fmt.Errorf("the job has not started on %s:\n%s", busy.ID, data)
		}
		return nil
	})
	t.Logf("apply to the job running on a cloud node (%s, %s): %s", busy.ID, busy.SiteID, time.Since(applied).Round(time.Millisecond))

	// The spot interruption notice, from that instance's metadata service.
	mu.Lock()
	addr := imds[busy.SiteID]
	mu.Unlock()
	if addr == "" {
		t.Fatalf("instance %s was not booted", busy.SiteID)
	}
	ec2test.StartMetadataMockAt(t, addr, ec2test.SpotInterruption, 0)
	noticed := time.Now()
	eventually(t, 40*time.Second, func() error {
		if slices.Contains(machines.Running(), busy.SiteID) {
			return fmt.Errorf("%s still runs", busy.SiteID)
		}
		return nil
	})
	t.Logf("notice to the interrupted instance's end: %s", time.Since(noticed).Round(time.Millisecond))
	st := readGlideinStatus(t, filepath.Join(base, busy.ID, "glidein.status"))
	if st.Phase != "ended" || st.Reason != "spot-interruption" || st.Drain == nil || st.Drain.Evicted != 1 {
		t.Fatalf("the interrupted glidein's status: %+v (drain %+v), want ended for spot-interruption with its job evicted\nthe job's log:\n%s",
			st, st.Drain, readFile(t, filepath.Join(w.dir, "job.log")))
	}
	if data := readFile(t, filepath.Join(w.dir, "job.log")); !strings.Contains(data, "004 (") {
		t.Fatalf("the job's log shows no eviction:\n%s", data)
	}

	// The next apply replaces the interrupted node.
	w.expect(0, cmd("apply", "-auto-approve")...)
	now := awsInstanceIDs(t, w)
	if len(now) != 2 || slices.Contains(now, busy.SiteID) {
		t.Fatalf("after the apply that replaces %s, instance_ids = %v (were %v)", busy.SiteID, now, first)
	}
	eventually(t, 60*time.Second, func() error {
		if data := readFile(t, filepath.Join(w.dir, "job.log")); !strings.Contains(data, "005 (") {
			return fmt.Errorf("the job has not finished:\n%s", data)
		}
		return nil
	})
	t.Logf("the job done after its node's interruption: %s", time.Since(began).Round(time.Millisecond))

	// Idle, every node ends itself, and its instance with it.
	eventually(t, 60*time.Second, func() error {
		if got := machines.Running(); len(got) != 0 {
			return fmt.Errorf("instances still running their agents: %v", got)
		}
		if live := liveInstances(t, client); len(live) != 0 {
			return fmt.Errorf("EC2 still has live instances: %v", live)
		}
		return nil
	})
	for _, g := range awsGlideinsOf(t, w, now) {
		if st := readGlideinStatus(t, filepath.Join(base, g.ID, "glidein.status")); st.Phase != "ended" || st.Reason != "idle" {
			t.Errorf("%s ended with status %+v, want ended for idle", g.ID, st)
		}
	}
	// Apply brings the count back; destroy terminates them all.
	w.expect(0, cmd("apply", "-auto-approve")...)
	if live := liveInstances(t, client); len(live) != 2 {
		t.Fatalf("after the apply that follows the idle ends, EC2 has live instances %v, want 2", live)
	}
	w.expect(0, cmd("destroy", "-auto-approve")...)
	if live := liveInstances(t, client); len(live) != 0 {
		t.Fatalf("after destroy, EC2 has live instances: %v", live)
	}
	eventually(t, 10*time.Second, func() error {
		if got := machines.Running(); len(got) != 0 {
			return fmt.Errorf("after destroy, instances still run their agents: %v", got)
		}
		return nil
	})
	t.Logf("the whole story: %s", time.Since(began).Round(time.Millisecond))
}

// awsGlidein is one glidein of examples/aws as the state lists it.
type awsGlidein struct {
	ID     string `json:"id"`
	SiteID string `json:"site_id"`
	State  string `json:"state"`
}

// awsGlideins returns the glideins of glidein.burst in the state.
func awsGlideins(t testing.TB, w *workdir) []awsGlidein {
	t.Helper()
	var doc struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Address string `json:"address"`
					Values  struct {
						Glideins []awsGlidein `json:"glideins"`
					} `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	r := w.expect(0, "show", "-json")
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("show -json: %v\n%s", err, r.stdout)
	}
	for _, res := range doc.Values.RootModule.Resources {
		if res.Address == "glidein.burst" {
			return res.Values.Glideins
		}
	}
	return nil
}

// awsGlideinsOf returns the glideins of the state whose instances are
// among ids.
func awsGlideinsOf(t *testing.T, w *workdir, ids []string) []awsGlidein {
	t.Helper()
	var out []awsGlidein
	for _, g := range awsGlideins(t, w) {
		if slices.Contains(ids, g.SiteID) {
			out = append(out, g)
		}
	}
	if len(out) != len(ids) {
		t.Fatalf("the state's glideins of the instances %v: %v", ids, out)
	}
	return out
}

// awsInstanceIDs returns the output instance_ids.
func awsInstanceIDs(t *testing.T, w *workdir) []string {
	t.Helper()
	var ids []string
	r := w.expect(0, "output", "-json", "instance_ids")
	if err := json.Unmarshal([]byte(r.stdout), &ids); err != nil {
		t.Fatalf("output -json instance_ids: %v\n%s", err, r.stdout)
	}
	return ids
}

// stateLineage returns the lineage of the working directory's state.
func stateLineage(t *testing.T, w *workdir) string {
	t.Helper()
	var st struct {
		Lineage string `json:"lineage"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(w.dir, "pond.state"))), &st); err != nil || st.Lineage == "" {
		t.Fatalf("the state's lineage: %v", err)
	}
	return st.Lineage
}

// liveInstances returns the tags of every instance pond launched that EC2
// does not say is terminated, by instance ID.
// startMoto starts moto as the EC2, SSM and STS endpoint and returns its
// address, an EC2 client of it and the ID of one of its images.
func startMoto(t testing.TB) (endpoint string, client *awsec2.Client, ami string) {
	t.Helper()
	endpoint = ec2test.StartMoto(t)
	ctx := context.Background()
	ac, err := ec2.LoadAWS(ctx, ec2test.Region, "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	client = awsec2.NewFromConfig(ac)
	im, err := client.DescribeImages(ctx, &awsec2.DescribeImagesInput{})
	if err != nil || len(im.Images) == 0 {
		t.Fatalf("moto's images: %v", err)
	}
	return endpoint, client, aws.ToString(im.Images[0].ImageId)
}

func liveInstances(t *testing.T, client *awsec2.Client) map[string]map[string]string {
	t.Helper()
	out, err := client.DescribeInstances(context.Background(), &awsec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("tag:" + ec2.TagManagedBy), Values: []string{ec2.ManagedBy}}}})
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]map[string]string{}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if in.State != nil && in.State.Name == types.InstanceStateNameTerminated {
				continue
			}
			tags := map[string]string{}
			for _, tg := range in.Tags {
				tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
			}
			live[aws.ToString(in.InstanceId)] = tags
		}
	}
	return live
}
