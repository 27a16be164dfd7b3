package startd

import (
	"log/slog"
	"os"
	"testing"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/startd/jobshim"
)

// BenchmarkSupervisorTrueJob measures a trivial job's (/bin/true) whole
// life under its supervisor: its start, its end and the wait for every
// process of it, as isolated here, and without namespaces.
func BenchmarkSupervisorTrueJob(b *testing.B) {
	s := &Startd{execute: b.TempDir(), log: slog.New(slog.DiscardHandler)}
	full, err := s.jobIsolation(config.New(config.Options{}))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		iso  isolation
	}{
		{"subreaper", isolation{}},
		{"pid-namespace", isolation{pidNS: full.pidNS, userNS: full.userNS}},
		{"isolated", full},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.iso.String() != "subreaper" && !full.pidNS {
				b.Skip("no namespaces here")
			}
			null, err := os.Open(os.DevNull)
			if err != nil {
				b.Fatal(err)
			}
			defer null.Close()
			for b.Loop() {
				dir, err := os.MkdirTemp(s.execute, "dir_")
				if err != nil {
					b.Fatal(err)
				}
				spec := jobshim.Spec{Path: "/bin/true", Args: []string{"/bin/true"}, Dir: dir}
				if spec.Mounts, err = scratchMounts(dir, c.iso.mounts); err != nil {
					b.Fatal(err)
				}
				p, err := startSupervisor(c.iso, spec, null, null, null)
				if err != nil {
					b.Fatal(err)
				}
				p.wait()
				if p.final == nil || p.final.ExitCode != 0 {
					b.Fatalf("the job did not end well: %v", p.waitErr)
				}
				removeScratch(dir)
			}
		})
	}
}
