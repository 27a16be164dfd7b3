package gridengine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/pond-htc/pond/overlay/glidein"
)

// Check verifies, without starting anything, that the Grid Engine
// commands run and reach the qmaster, that the queues, the project and
// the parallel environment exist, that flock is there (exactly-once
// submission needs it), that the work directory can be written, and that
// the scheduler would place such a job in an empty cluster (qsub -w v).
func (s *Site) Check(ctx context.Context) error {
	c := s.cfg.Commands
	for _, cmd := range []struct{ attr, path string }{
		{"qsub", c.Qsub}, {"qstat", c.Qstat}, {"qdel", c.Qdel}, {"qacct", c.Qacct}, {"qconf", c.Qconf},
	} {
		if _, err := s.run(ctx, "flock", "/bin/sh", "-c", `command -v "$1" > /dev/null`, "sh", cmd.path); err != nil {
			return fmt.Errorf("gridengine site: %s command %q: not found on %s (set commands.%s to its path)", cmd.attr, cmd.path, s.runner.Where(), cmd.attr)
		}
	}
	if _, err := s.run(ctx, "flock", "/bin/sh", "-c", "command -v flock"); err != nil {
		return fmt.Errorf("gridengine site: flock (util-linux), which keeps a glidein from being submitted twice, is not found on %s: %w", s.runner.Where(), err)
	}
	if _, err := s.run(ctx, "qconf", c.Qconf, "-sql"); err != nil {
		return fmt.Errorf("gridengine site: %w", err)
	}
	if s.cfg.Queue != "" {
		for _, q := range strings.Split(s.cfg.Queue, ",") {
			name, _, _ := strings.Cut(q, "@")
			if _, err := s.run(ctx, "qconf", c.Qconf, "-sq", name); err != nil {
				return &glidein.SettingError{Setting: "queue", Err: fmt.Errorf("queue %q: %w", name, err)}
			}
		}
	}
	if s.cfg.Project != "" {
		if _, err := s.run(ctx, "qconf", c.Qconf, "-sprj", s.cfg.Project); err != nil {
			return &glidein.SettingError{Setting: "project", Err: fmt.Errorf("project %q: %w", s.cfg.Project, err)}
		}
	}
	if s.cfg.PE != "" {
		if _, err := s.run(ctx, "qconf", c.Qconf, "-sp", s.cfg.PE); err != nil {
			return &glidein.SettingError{Setting: "parallel_environment", Err: fmt.Errorf("parallel_environment %q: %w", s.cfg.PE, err)}
		}
	}
	if err := s.fs.CheckWorkDir(ctx); err != nil {
		return &glidein.SettingError{Setting: "work_dir", Err: fmt.Errorf("work_dir %s: %w", s.cfg.WorkDir, err)}
	}
	if err := s.verify(ctx); err != nil {
		return fmt.Errorf("gridengine site: %w", err)
	}
	return nil
}

// verify asks qsub whether the scheduler would place a glidein as
// configured (qsub -w v), which submits nothing.
func (s *Site) verify(ctx context.Context) error {
	dir, err := s.fs.TempDir(ctx)
	if err != nil {
		return fmt.Errorf("work_dir %s: %w", s.cfg.WorkDir, err)
	}
	defer s.fs.RemoveAll(context.WithoutCancel(ctx), dir)
	req := glidein.Request{ID: glidein.IDPrefix + "check"}
	script := filepath.Join(dir, ScriptName)
	if err := s.fs.WriteFile(ctx, script, []byte(s.script(req, dir, "/bin/true"))); err != nil {
		return err
	}
	args := append([]string{"-w", "v"}, s.options(req, dir)...)
	if _, err := s.run(ctx, "qsub", s.cfg.Commands.Qsub, append(args, script)...); err != nil {
		return fmt.Errorf("the scheduler would not place such a glidein: %w", err)
	}
	return nil
}
