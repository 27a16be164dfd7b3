package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/state"
)

// generateImportConfig writes to path the resource blocks of the import
// blocks' targets the configuration lacks, as plan -generate-config-out
// asks, and returns the configuration loaded again with them. path must
// not exist: pond never overwrites a file with generated configuration.
// quiet (plan -json) leaves stdout to the plan.
func (m *meta) generateImportConfig(ctx context.Context, cfg *config.Config, vars map[string]cty.Value, sea string, prior *state.State, path string, quiet bool) (*config.Config, bool) {
	if !strings.HasSuffix(path, config.NativeSuffix) {
		m.errorf("Invalid -generate-config-out: %s does not end in %s, so pond would not read it as configuration", path, config.NativeSuffix)
		return nil, false
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(m.dir, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		m.fail("Invalid -generate-config-out", err)
		return nil, false
	}
	if dir, _ := filepath.Abs(cfg.Dir); filepath.Dir(abs) != dir {
		m.errorf("Invalid -generate-config-out: %s is not in the configuration directory %s, so pond would not read it", path, cfg.Dir)
		return nil, false
	}
	if _, err := os.Lstat(abs); err == nil {
		m.errorf("Target generated file already exists: pond will not overwrite %s; remove it or choose another file", path)
		return nil, false
	} else if !errors.Is(err, fs.ErrNotExist) {
		m.fail("Cannot write generated configuration", err)
		return nil, false
	}
	eng := m.engine(cfg, vars, sea, nil)
	src, diags := eng.GenerateImportConfig(ctx, prior)
	eng.Close()
	if diags.HasErrors() {
		m.diags(diags)
		return nil, false
	}
	if src == nil {
		m.diags(diags)
		return cfg, true
	}
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		m.fail("Cannot write generated configuration", err)
		return nil, false
	}
	if _, err := f.Write(src); err != nil {
		f.Close()
		os.Remove(abs)
		m.fail("Cannot write generated configuration", err)
		return nil, false
	}
	if err := f.Close(); err != nil {
		m.fail("Cannot write generated configuration", err)
		return nil, false
	}
	if !quiet {
		fmt.Fprintf(m.stdout, "Wrote configuration for the import targets to %s: review it before applying.\n", path)
	}
	m.diags(diags)
	return m.loadConfig()
}
