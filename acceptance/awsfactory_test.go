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
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

// awsFactoryJob is a job of examples/aws-factory that only a cloud node
// runs: %d MB of memory, so that the factory picks the instance type.
const awsFactoryJob = `executable          = /bin/sleep
arguments           = %d
transfer_executable = false
requirements        = IsGlidein =?= true && Site == "aws"
request_cpus        = 1
request_memory      = %d
log                 = %s
queue %d
`

// TestAWSFactoryExample runs examples/aws-factory with the real pondctl,
// moto as EC2 and SSM, and each instance's real user data run as a local
// process (ec2test.Machines): the central manager's pilot factory uses
// EC2 as an entry.
//
// apply installs the entry and launches nothing → a job asking more memory
// than any of the entry's instance types has launches nothing → jobs that
// no slot can run make the factory launch instances of the cheapest type
// whose memory fits them (the entry's offers, as the factory prices
// them), tagged as pondctl's own (managed-by, the state's lineage, the
// resource's address) → the instances bootstrap (credential from SSM),
// join the pool and run the jobs → the queue drains (the big job removed)
// → idle, every instance ends itself and EC2 says it is terminated → no
// instance is launched again → a new job launches one, and destroy
// removes the entry and terminates it: no instance left.
func TestAWSFactoryExample(t *testing.T) {
	t.Parallel()
	endpoint, client, ami := startMoto(t)
	ctx := context.Background()

	w := newWorkdir(t, "aws-factory")
	base := t.TempDir() // the instances' /var/lib/pond
	vars := []string{"-var=endpoint=" + endpoint, "-var=ami=" + ami,
		"-var=agent_binary=" + pondBin, "-var=base_dir=" + base, "-var=idle_timeout=10s", "-var=max_running=3"}
	cmd := func(args ...string) []string { return append(args, vars...) }

	machines := ec2test.NewMachines(t, endpoint)
	// A metadata service of each instance's own where nothing listens:
	// no notice (and no call to 169.254.169.254 from this machine).
	machines.Env = func(string) []string {
		return []string{"AWS_EC2_METADATA_SERVICE_ENDPOINT=http://" + ec2test.FreeAddr(t)}
	}
	defer func() {
		if t.Failed() {
			t.Logf("the instances' user data:%s", machines.Logs(20))
		}
	}()
	machines.Run(300 * time.Millisecond)
	all := func() map[string]types.Instance {
		out, err := client.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]types.Instance{}
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				m[aws.ToString(in.InstanceId)] = in
			}
		}
		return m
	}
	entry := func() api.FactoryEntry {
		var st api.FactoryStatus
		r := w.expect(0, "sea", "factory", "-sea", w.output("central_manager"), "-json")
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("sea factory -json: %v\n%s", err, r.stdout)
		}
		for _, e := range st.Entries {
			if e.Name == "burst" {
				return e
			}
		}
		t.Fatalf("the central manager's factory has no entry burst:\n%s", r.stdout)
		return api.FactoryEntry{}
	}

	began := time.Now()
	w.expect(0, cmd("apply", "-auto-approve")...)
	cm := w.output("central_manager")
	lineage := stateLineage(t, w)
	offers := entry().Offers
	if len(offers) != 3 {
		t.Fatalf("the entry's offers %+v: want the example's three instance types", offers)
	}
	// What a job of 6000 MB should get: the cheapest offer with the
	// memory (the offers are cheapest first), and that no offer has
	// 64000 MB.
	const fits, tooBig = 6000, 64000
	want := ""
	for _, o := range offers {
		if o.MemoryMB >= tooBig {
			t.Fatalf("offer %+v has %d MB: the test's big job would fit", o, tooBig)
		}
		if want == "" && o.MemoryMB >= fits && o.CPUs >= 1 {
			want = o.Name
		}
	}
	if want == "" || want == offers[0].Name {
		t.Fatalf("offers %+v: want the cheapest unable to run a job of %d MB, and one able", offers, fits)
	}
	t.Logf("offers %+v: a job of %d MB wants a %s", offers, fits, want)

	// A job bigger than every type: nothing launched, cycle after cycle.
	w.write("big.sub", fmt.Sprintf(awsFactoryJob, 1, tooBig, "big.log", 1))
	w.expect(0, "condor", "submit", "-pool", cm, "big.sub")
	eventually(t, 20*time.Second, func() error {
		if e := entry(); e.Matched != 0 || e.Wanted != 0 {
			return fmt.Errorf("the entry matched %d jobs and wants %d glideins for the big job", e.Matched, e.Wanted)
		}
		if r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId"); strings.TrimSpace(r.stdout) == "" {
			return fmt.Errorf("the big job is not in the queue yet")
		}
		return nil
	})
	time.Sleep(6 * time.Second) // three cycles of the factory
	if got := all(); len(got) != 0 {
		t.Fatalf("a job bigger than every instance type launched %d instances", len(got))
	}

	// Jobs that fit one type: instances of that type, tagged as pondctl's.
	const jobs = 2
	w.write("jobs.sub", fmt.Sprintf(awsFactoryJob, 6, fits, "jobs.log", jobs))
	submitted := time.Now()
	w.expect(0, "condor", "submit", "-pool", cm, "jobs.sub")
	var (
		mu      sync.Mutex
		firstUp time.Duration
	)
	eventually(t, 90*time.Second, func() error {
		if firstUp == 0 && len(machines.Running()) > 0 {
			mu.Lock()
			firstUp = time.Since(submitted)
			mu.Unlock()
		}
		if n := strings.Count(readFile(t, filepath.Join(w.dir, "jobs.log")), "\n005 ("); n != jobs {
			return fmt.Errorf("%d of %d jobs done; instances %d; entry %+v", n, jobs, len(all()), entry().Funnel)
		}
		return nil
	})
	t.Logf("jobs submitted to the first instance booting: %s; to all %d jobs done: %s", firstUp.Round(time.Millisecond),
		jobs, time.Since(submitted).Round(time.Millisecond))
	launched := all()
	if len(launched) == 0 || len(launched) > jobs {
		t.Fatalf("%d instances launched for %d jobs, want 1 to %d", len(launched), jobs, jobs)
	}
	for id, in := range launched {
		if string(in.InstanceType) != want {
			t.Errorf("instance %s is a %s, want %s (the cheapest of %+v with %d MB)", id, in.InstanceType, want, offers, fits)
		}
		tags := map[string]string{}
		for _, tg := range in.Tags {
			tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		for k, v := range map[string]string{ec2.TagManagedBy: ec2.ManagedBy, ec2.TagLineage: lineage, ec2.TagAddress: "glidein.burst"} {
			if tags[k] != v {
				t.Errorf("instance %s: tag %s = %q, want %q (tags %v)", id, k, tags[k], v, tags)
			}
		}
		if !strings.HasPrefix(tags[ec2.TagID], "pond-campus-burst-") {
			t.Errorf("instance %s: tag %s = %q, want the factory's glidein ID", id, ec2.TagID, tags[ec2.TagID])
		}
	}
	// The jobs ran on the instances' glideins.
	r := w.expect(0, "condor", "history", "-pool", cm, "-af", "RequestMemory", "LastRemoteHost")
	n := 0
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, fmt.Sprintf("%d ", fits)) && strings.Contains(line, "@pond-campus-burst-") {
			n++
		}
	}
	if n != jobs {
		t.Errorf("condor history: %d of %d jobs ran on a glidein of the entry:\n%s", n, jobs, r.stdout)
	}

	// The queue drains: the big job removed, nothing idle is left.
	w.expect(0, "condor", "rm", "-pool", cm, "-all")
	eventually(t, 10*time.Second, func() error {
		if r := w.run("condor", "q", "-pool", cm, "-af", "ClusterId"); strings.TrimSpace(r.stdout) != "" {
			return fmt.Errorf("the queue has not drained: %s", r.stdout)
		}
		return nil
	})
	drained := time.Now()
	// Idle, every instance ends itself.
	eventually(t, 60*time.Second, func() error {
		if got := machines.Running(); len(got) != 0 {
			return fmt.Errorf("instances still running their agents: %v", got)
		}
		if live := liveInstances(t, client); len(live) != 0 {
			return fmt.Errorf("EC2 still has live instances: %v", live)
		}
		return nil
	})
	t.Logf("queue drained to every instance terminated: %s", time.Since(drained).Round(time.Millisecond))
	for _, in := range launched {
		id := ""
		for _, tg := range in.Tags {
			if aws.ToString(tg.Key) == ec2.TagID {
				id = aws.ToString(tg.Value)
			}
		}
		if st := readGlideinStatus(t, filepath.Join(base, id, "glidein.status")); st.Phase != "ended" || st.Reason != "idle" {
			t.Errorf("%s ended with status %+v, want ended for idle", id, st)
		}
	}
	time.Sleep(6 * time.Second) // three cycles: nothing launched again
	if n := len(all()); n != len(launched) {
		t.Fatalf("with the queue empty, %d instances launched, were %d", n, len(launched))
	}

	// A new job launches an instance; destroy terminates it.
	w.write("more.sub", fmt.Sprintf(awsFactoryJob, 60, fits, "more.log", 1))
	w.expect(0, "condor", "submit", "-pool", cm, "more.sub")
	eventually(t, 30*time.Second, func() error {
		if live := liveInstances(t, client); len(live) == 0 {
			return fmt.Errorf("no instance launched for the new job")
		}
		return nil
	})
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
	ids := make([]string, 0, len(launched))
	for id := range launched {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	t.Logf("instances %v; the whole story: %s", ids, time.Since(began).Round(time.Millisecond))
}
