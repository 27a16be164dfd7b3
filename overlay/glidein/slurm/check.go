package slurm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
)

// Check verifies, without starting anything, that the Slurm commands run
// and reach the cluster, that the partition exists, is up, allows the
// account and QOS and the time limit, that the account and QOS exist, that
// the work directory can be written, and that sbatch would take such a job
// (sbatch --test-only).
func (s *Site) Check(ctx context.Context) error {
	c := s.cfg.Commands
	for _, cmd := range []struct{ attr, path string }{
		{"sbatch", c.Sbatch}, {"squeue", c.Squeue}, {"sacct", c.Sacct}, {"scancel", c.Scancel}, {"scontrol", c.Scontrol},
	} {
		if _, err := s.run(ctx, cmd.attr, cmd.path, "--version"); err != nil {
			return fmt.Errorf("slurm site: %w", err)
		}
	}
	if s.remoteLogin() {
		if _, err := s.run(ctx, "flock", "/bin/sh", "-c", "command -v flock"); err != nil {
			return fmt.Errorf("slurm site: flock (util-linux), which keeps a glidein from being submitted twice, is not found on the %s: %w", s.runner.Where(), err)
		}
	}
	if err := s.checkPartitions(ctx); err != nil {
		return fmt.Errorf("slurm site: %w", err)
	}
	if err := s.checkAccounting(ctx); err != nil {
		return fmt.Errorf("slurm site: %w", err)
	}
	if err := s.fs.CheckWorkDir(ctx); err != nil {
		return fmt.Errorf("slurm site: work_dir %s: %w", s.cfg.WorkDir, err)
	}
	if err := s.testOnly(ctx); err != nil {
		return fmt.Errorf("slurm site: %w", err)
	}
	return nil
}

// checkPartitions finds the partitions (or the default one) with scontrol.
func (s *Site) checkPartitions(ctx context.Context) error {
	if s.cfg.Partition == "" {
		out, err := s.run(ctx, "scontrol", s.cfg.Commands.Scontrol, "show", "partition", "--oneliner")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(out), "\n") {
			if p := parseKeyValues(line); p["Default"] == "YES" {
				return s.checkPartition("", p)
			}
		}
		return &glidein.SettingError{Setting: "partition", Err: errors.New("partition: the cluster has no default partition: set partition")}
	}
	for _, name := range strings.Split(s.cfg.Partition, ",") {
		out, err := s.run(ctx, "scontrol", s.cfg.Commands.Scontrol, "show", "partition", "--oneliner", name)
		if err != nil {
			var ce *cmdError
			if errors.As(err, &ce) && ce.said("not found") {
				return &glidein.SettingError{Setting: "partition", Err: fmt.Errorf("partition %q: the cluster has no such partition", name)}
			}
			if errors.As(err, &ce) && ce.unreachable != "" {
				// The controller, not the partition, is at fault.
				return err
			}
			return &glidein.SettingError{Setting: "partition", Err: fmt.Errorf("partition %q: %w", name, err)}
		}
		if err := s.checkPartition(name, parseKeyValues(strings.TrimSpace(string(out)))); err != nil {
			return err
		}
	}
	return nil
}

func (s *Site) checkPartition(name string, p map[string]string) error {
	what := fmt.Sprintf("partition %q", name)
	if name == "" {
		what = fmt.Sprintf("default partition %q", p["PartitionName"])
	}
	switch p["State"] {
	case "UP", "DOWN":
	default:
		return &glidein.SettingError{Setting: "partition", Err: fmt.Errorf("%s is %s: it takes no jobs", what, p["State"])}
	}
	if limit := s.cfg.TimeLimit; limit > 0 {
		if maxTime, ok := parseDuration(p["MaxTime"]); ok && time.Duration(minutes(limit))*time.Minute > maxTime {
			return &glidein.SettingError{Setting: "time_limit", Err: fmt.Errorf("time_limit %v is beyond the %s MaxTime %s", limit, what, p["MaxTime"])}
		}
	}
	for _, a := range []struct{ attr, v, key string }{{"account", s.cfg.Account, "AllowAccounts"}, {"qos", s.cfg.QOS, "AllowQos"}} {
		if a.v == "" || p[a.key] == "" || p[a.key] == "ALL" {
			continue
		}
		if !contains(strings.Split(p[a.key], ","), a.v) {
			return &glidein.SettingError{Setting: a.attr, Err: fmt.Errorf("%s %q: the %s allows only %s", a.attr, a.v, what, p[a.key])}
		}
	}
	return nil
}

// checkAccounting finds the account and QOS with sacctmgr. A cluster
// without accounting storage knows neither: giving them is then an error,
// since nothing would check or charge them.
func (s *Site) checkAccounting(ctx context.Context) error {
	if s.cfg.Account == "" && s.cfg.QOS == "" {
		return nil
	}
	out, err := s.run(ctx, "scontrol", s.cfg.Commands.Scontrol, "show", "config")
	if err != nil {
		return err
	}
	storage := ""
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "AccountingStorageType" {
			storage = strings.TrimSpace(v)
		}
	}
	if storage == "accounting_storage/none" {
		attr := "account"
		if s.cfg.Account == "" {
			attr = "qos"
		}
		return fmt.Errorf("%s is set, but the cluster keeps no accounts (AccountingStorageType=%s): nothing checks or charges it; remove %s", attr, storage, attr)
	}
	if s.cfg.Account != "" {
		_, who, err := s.fs.User(ctx)
		if err != nil {
			return err
		}
		out, err := s.run(ctx, "sacctmgr", s.cfg.Commands.Sacctmgr, "--noheader", "--parsable2", "show", "associations",
			"where", "account="+s.cfg.Account, "user="+who, "format=Account")
		if err != nil {
			return fmt.Errorf("account %q: %w", s.cfg.Account, err)
		}
		if strings.TrimSpace(string(out)) == "" {
			return &glidein.SettingError{Setting: "account", Err: fmt.Errorf("account %q: no such account for user %s (sacctmgr show associations)", s.cfg.Account, who)}
		}
	}
	if s.cfg.QOS != "" {
		out, err := s.run(ctx, "sacctmgr", s.cfg.Commands.Sacctmgr, "--noheader", "--parsable2", "show", "qos", "where", "name="+s.cfg.QOS, "format=Name")
		if err != nil {
			return fmt.Errorf("qos %q: %w", s.cfg.QOS, err)
		}
		if strings.TrimSpace(string(out)) == "" {
			return &glidein.SettingError{Setting: "qos", Err: fmt.Errorf("qos %q: no such QOS (sacctmgr show qos)", s.cfg.QOS)}
		}
	}
	return nil
}

// testOnly asks sbatch whether it would take a glidein as configured.
func (s *Site) testOnly(ctx context.Context) error {
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
	args := append([]string{"--test-only"}, s.options(req, dir)...)
	if _, err := s.run(ctx, "sbatch", s.cfg.Commands.Sbatch, append(args, script)...); err != nil {
		return fmt.Errorf("sbatch would refuse such a glidein: %w", err)
	}
	return nil
}

// parseKeyValues reads scontrol's --oneliner KEY=VALUE KEY=VALUE.
func parseKeyValues(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

// parseDuration reads a Slurm time limit: MINUTES, MINUTES:SECONDS,
// HOURS:MINUTES:SECONDS, DAYS-HOURS[:MINUTES[:SECONDS]]. UNLIMITED,
// INFINITE and anything else unreadable are not ok.
func parseDuration(s string) (time.Duration, bool) {
	days := 0
	rest := s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > 36500 {
			return 0, false
		}
		days, rest = n, r
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return 0, false
	}
	nums := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 1e6 {
			return 0, false
		}
		nums[i] = n
	}
	var h, m, sec int
	switch {
	case days > 0 || strings.Contains(s, "-"):
		// DAYS-HOURS, DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS
		h = nums[0]
		if len(nums) > 1 {
			m = nums[1]
		}
		if len(nums) > 2 {
			sec = nums[2]
		}
	case len(nums) == 1:
		m = nums[0]
	case len(nums) == 2:
		m, sec = nums[0], nums[1]
	default:
		h, m, sec = nums[0], nums[1], nums[2]
	}
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
