package schedd

import (
	"context"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// TestSubmitPoolStamp checks that the job ads a schedd sends to a
// negotiator (its idle autoclusters) and with a claim (the job's own ad)
// name its pool in PondSubmitPool, replacing whatever the submitter set,
// in any case, and carry none from a schedd of no pool; the queue keeps
// the job as submitted.
func TestSubmitPoolStamp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, pool string
		extra      wire.Ad
		want       string // the attribute's text in the ads sent, "" for absent
	}{
		{"pool", "spare", nil, `"spare"`},
		{"submitter lies", "busy", wire.Ad{"pondsubmitpool": `"spare"`}, `"busy"`},
		{"no pool", "", nil, ""},
		{"no pool, submitter lies", "", wire.Ad{"PONDSUBMITPOOL": `"spare"`}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := config.New(config.Options{Host: config.HostInfo{FullHostname: "submit.example.org", Hostname: "submit",
				IPAddress: "127.0.0.1", CPUs: 1, MemoryMB: 1024}})
			src := "UID_DOMAIN = example.org\n"
			if tt.pool != "" {
				src += KnobPool + " = " + tt.pool + "\n"
			}
			if err := cfg.ParseInto("test.cfg", []byte(src)); err != nil {
				t.Fatal(err)
			}
			s, err := New(ctx, Options{Config: cfg, Name: "schedd@submit", Address: "submit.example.org:9618", DataDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			nc, err := s.NewCluster(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			job := wire.Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "JobUniverse": "5", "RequestCpus": "1", "JobStatus": "1"}
			for k, v := range tt.extra {
				job[k] = v
			}
			if _, err := s.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{job}}); err != nil {
				t.Fatal(err)
			}
			check := func(what string, ad wire.Ad) {
				t.Helper()
				var got []string
				for k, v := range ad {
					if strings.EqualFold(k, AttrSubmitPool) {
						got = append(got, k+" = "+v)
					}
				}
				switch {
				case tt.want == "" && len(got) != 0:
					t.Errorf("%s: %v, want no %s", what, got, AttrSubmitPool)
				case tt.want != "" && (len(got) != 1 || got[0] != AttrSubmitPool+" = "+tt.want):
					t.Errorf("%s: %v, want %s = %s", what, got, AttrSubmitPool, tt.want)
				}
				if tt.want != "" {
					cad, err := wire.ToClassAd(ad)
					if err != nil {
						t.Fatal(err)
					}
					if v, _ := cad.EvalAttr(AttrSubmitPool).StringValue(); classad.QuoteString(v) != tt.want {
						t.Errorf("%s: %s evaluates to %q", what, AttrSubmitPool, v)
					}
				}
			}
			resp, err := s.Idle(ctx, &wire.IdleRequest{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Clusters) != 1 {
				t.Fatalf("%d idle autoclusters, want 1", len(resp.Clusters))
			}
			check("idle autocluster", resp.Clusters[0].Ad)
			id := jobqueue.JobID{Cluster: nc.Cluster, Proc: 0}
			ja, err := s.loadJob(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			check("claimed job", ja.w)
			if v, _ := ja.ad.EvalAttr(AttrSubmitPool).StringValue(); tt.want != "" && classad.QuoteString(v) != tt.want {
				t.Errorf("claimed job's parsed ad: %s = %q", AttrSubmitPool, v)
			}
			// The queue keeps what was submitted.
			j, err := s.q.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for k := range j.Ad {
				if strings.EqualFold(k, AttrSubmitPool) && tt.extra[k] == "" {
					t.Errorf("the queue's ad got %s = %s", k, j.Ad[k])
				}
			}
		})
	}
}
