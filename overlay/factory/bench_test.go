package factory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/factory"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// BenchmarkFactory measures, over a real pool and a real SSH host, the
// factory's reaction time (from jobs queued at the schedd to the first
// glidein submitted, with cycles every second) and how many glideins it
// submits per second while it ramps up to 32 for 32 idle jobs (-short: 8
// for 8).
//
//	go test -run XXX -bench BenchmarkFactory -benchtime 3x ./overlay/factory/
func BenchmarkFactory(b *testing.B) {
	srv := sshtest.Start(b, 1)
	cm := startCM(b)
	site := sshSite(b, srv, 64)
	n := 32
	if testing.Short() {
		n = 8
	}
	submitJobs(b, cm, n, 1, 64)
	var reaction, rate time.Duration
	var submitted int
	for i := range b.N {
		name := fmt.Sprintf("b%d", i)
		f, err := factory.New(factory.Options{Pool: "campus", DataDir: b.TempDir(),
			Source:   &factory.WirePool{CentralManager: cm.CondorHost},
			Sites:    func(api.FactoryEntrySpec) (glidein.Site, error) { return site, nil },
			Launch:   sleeper,
			Interval: time.Second, JoinTimeout: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		e := api.FactoryEntrySpec{Name: name, Site: api.FactorySite{Kind: "ssh"},
			Template: api.FactoryTemplate{CPUs: 1, MemoryMB: 64, Lifetime: api.Duration(5 * time.Minute)},
			Limits:   api.FactoryLimits{MaxQueued: n, MaxRunning: n, MaxSubmitPerCycle: n}}
		if err := f.SetEntry(e); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		done := make(chan struct{})
		go func() { f.Run(ctx); close(done) }()
		first := time.Time{}
		for {
			st := entryStatus(f, name)
			if first.IsZero() && st.Funnel.Requested > 0 {
				first = time.Now()
			}
			if st.Funnel.Requested >= n {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		end := time.Now()
		cancel()
		<-done
		reaction += first.Sub(start)
		rate += end.Sub(first)
		submitted += n - 1
		gs, _ := site.List(context.Background(), glidein.IDPrefix+"campus-"+name+"-")
		for _, g := range gs {
			site.Cancel(context.Background(), g.ID)
		}
		f.Close()
	}
	b.ReportMetric(float64(reaction.Milliseconds())/float64(b.N), "reaction-ms")
	b.ReportMetric(float64(submitted)/rate.Seconds(), "glideins/s")
}
