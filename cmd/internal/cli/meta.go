package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/mattn/go-isatty"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/cmd/internal/ui/jsonview"
	"github.com/pond-htc/pond/overlay/glidein/kinds"
	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/planner/funcs"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/glidein"
	"github.com/pond-htc/pond/providers/local"
	"github.com/pond-htc/pond/providers/sea"
	"github.com/pond-htc/pond/state"
	"github.com/pond-htc/pond/state/backend"
)

// Version is pondctl's version, the one it records in the states it writes.
const Version = state.PondVersion

// meta is what every command shares: where it runs and how it prints.
type meta struct {
	dir    string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	env    []string
	color  bool
	// files holds the configuration sources, for diagnostic snippets.
	files map[string]*hcl.File
	// schemas caches provider schemas by provider name.
	schemas map[string]*providers.ProviderSchema
	// logger receives the log records of the planner and the providers;
	// nil for none (POND_LOG unset).
	logger *slog.Logger
	// view, when set (-json), receives the diagnostics as messages of the
	// machine-readable UI on stdout instead of text on stderr.
	view *jsonview.View
}

func (m *meta) col() colorizer { return colorizer{on: m.color} }

// getenv looks a variable up in the command's environment.
func (m *meta) getenv(k string) string {
	for i := len(m.env) - 1; i >= 0; i-- {
		if name, v, ok := strings.Cut(m.env[i], "="); ok && name == k {
			return v
		}
	}
	return ""
}

// diags prints diagnostics and reports whether any is an error.
func (m *meta) diags(d hcl.Diagnostics) bool {
	if len(d) == 0 {
		return false
	}
	if m.view != nil {
		for _, jd := range jsonDiagnostics(m.relDiags(d)) {
			m.view.Diagnostic(jd, nil)
		}
		return d.HasErrors()
	}
	_ = config.WriteDiagnostics(m.stderr, m.relFiles(), m.relDiags(d), m.color)
	return d.HasErrors()
}

// relDiags returns d with the file names of their ranges relative to the
// working directory when under it, as Terraform prints them.
func (m *meta) relDiags(d hcl.Diagnostics) hcl.Diagnostics {
	out := make(hcl.Diagnostics, len(d))
	for i, diag := range d {
		c := *diag
		if c.Subject != nil {
			r := *c.Subject
			r.Filename = m.relPath(r.Filename)
			c.Subject = &r
		}
		if c.Context != nil {
			r := *c.Context
			r.Filename = m.relPath(r.Filename)
			c.Context = &r
		}
		out[i] = &c
	}
	return out
}

// relFiles returns the configuration sources by the names relDiags
// gives them.
func (m *meta) relFiles() map[string]*hcl.File {
	if len(m.files) == 0 {
		return m.files
	}
	out := make(map[string]*hcl.File, 2*len(m.files))
	for name, f := range m.files {
		out[name] = f
		out[m.relPath(name)] = f
	}
	return out
}

// warnings prints the warnings of an operation that succeeded, after what
// it printed: as text, or as diagnostic events of h when it prints JSON.
func (m *meta) warnings(diags hcl.Diagnostics, h *uiHooks) {
	if len(diags) == 0 {
		return
	}
	if h != nil && h.view != nil && m.view == nil {
		h.diagnostics(m.relDiags(diags))
		return
	}
	m.diags(diags)
}

// errorf prints an error the way diagnostics are printed and returns 1.
func (m *meta) errorf(format string, args ...any) int {
	m.diags(hcl.Diagnostics{{Severity: hcl.DiagError, Summary: fmt.Sprintf(format, args...)}})
	return 1
}

// fail prints err as an error diagnostic with a summary and returns 1.
func (m *meta) fail(summary string, err error) int {
	m.diags(hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: err.Error()}})
	return 1
}

// providerRegistry is every provider pondctl embeds: local, sea, and a
// glidein provider for each kind of site (overlay/glidein/kinds), named
// after it.
func providerRegistry() map[string]providers.Factory {
	reg := map[string]providers.Factory{
		"local": local.New,
		"sea":   sea.New,
	}
	sites := kinds.Registry()
	for _, name := range sites.Names() {
		k, _ := sites.Lookup(name)
		reg[name] = glidein.Factory(k)
	}
	return reg
}

// resourceTypes maps resource types to their default providers.
// A glidein names its provider (provider.slurm, provider.ssh or
// provider.aws); slurm
// is the default.
var resourceTypes = map[string]string{"pool": "local", "pond": "sea", "flock": "sea", glidein.ResourceType: "slurm"}

// dataTypes maps data source types to their default providers.
var dataTypes = map[string]string{"sea_query": "sea"}

func loadOptions() config.LoadOptions {
	opts := config.LoadOptions{}
	for t := range resourceTypes {
		opts.ManagedTypes = append(opts.ManagedTypes, t)
	}
	for t := range dataTypes {
		opts.DataTypes = append(opts.DataTypes, t)
	}
	sort.Strings(opts.ManagedTypes)
	sort.Strings(opts.DataTypes)
	return opts
}

// loadConfig loads and validates the configuration of the working
// directory.
func (m *meta) loadConfig() (*config.Config, bool) {
	cfg, d := config.LoadDir(m.dir, loadOptions())
	if cfg != nil {
		m.files = cfg.Files
	}
	if cfg != nil && !d.HasErrors() {
		d = append(d, cfg.Validate()...)
	}
	if m.diags(d) {
		return nil, false
	}
	return cfg, true
}

// noConfig reports, as an error, a directory with no configuration file
// for a command that would read its absence as "nothing is wanted": a
// plan or apply run in the wrong directory, or after the files were
// renamed, would destroy everything the state holds. what is the
// command's sentence of what it would do, and instead the command that
// does it on purpose.
func (m *meta) noConfig(cfg *config.Config, what, instead string) bool {
	if cfg == nil || len(cfg.Files) > 0 {
		return false
	}
	m.diags(hcl.Diagnostics{noConfigDiag(m.dir, " "+what+" without a configuration would destroy everything the state holds, which is rarely what is meant; to destroy it, run "+instead+".")})
	return true
}

// noConfigDiag is the error of a directory dir with no configuration
// file, its detail ended by more.
func noConfigDiag(dir, more string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No configuration files",
		Detail: "There is no *.pond.hcl or *.pond.json file in " + dir + "." + more}
}

// path resolves a path given on the command line against the working
// directory, which -chdir sets, as Terraform reads and writes every such
// path in the directory -chdir names.
func (m *meta) path(p string) string {
	if p == "" || p == "-" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(m.dir, p)
}

// collectVars computes the root variable values.
func (m *meta) collectVars(cfg *config.Config, vf *varFlags, input bool) (map[string]cty.Value, bool) {
	args := make([]config.VarArg, len(vf.args))
	for i, a := range vf.args {
		if a.File != "" {
			a.File = m.path(a.File)
		}
		args[i] = a
	}
	opts := config.VarOptions{Environ: m.env, Args: args, Input: input}
	if input && isTerminal(m.stdin) {
		r := bufio.NewReader(m.stdin)
		opts.Prompt = func(name, desc string) (string, error) {
			fmt.Fprintf(m.stdout, "var.%s\n", name)
			if desc != "" {
				fmt.Fprintf(m.stdout, "  %s\n", desc)
			}
			fmt.Fprint(m.stdout, "\n  Enter a value: ")
			line, err := r.ReadString('\n')
			if err != nil && line == "" {
				return "", err
			}
			return strings.TrimRight(line, "\r\n"), nil
		}
	} else {
		opts.Input = false
	}
	vals, d := config.CollectVariables(cfg, opts)
	if m.diags(d) {
		return nil, false
	}
	return vals, true
}

// backendFor returns the state backend the configuration names, the local
// file backend by default, with the settings pondctl init's
// -backend-config flags saved merged over its block.
func (m *meta) backendFor(ctx context.Context, cfg *config.Config) (state.Backend, error) {
	typ, settings, err := backendBlock(cfg)
	if err != nil {
		return nil, err
	}
	saved, err := readSavedBackend(m.dir)
	if err != nil {
		return nil, err
	}
	return backend.New(ctx, typ, mergeSaved(settings, saved, typ), m.dir)
}

// backendBlock returns the type and settings of the configuration's
// backend block: the local backend's when it has none.
func backendBlock(cfg *config.Config) (string, map[string]string, error) {
	typ := "local"
	settings := map[string]string{}
	if cfg != nil && cfg.Pond != nil && cfg.Pond.Backend != nil {
		typ = cfg.Pond.Backend.Type
		attrs, d := cfg.Pond.Backend.Config.JustAttributes()
		if d.HasErrors() {
			return "", nil, errors.New(d.Error())
		}
		for name, a := range attrs {
			var s string
			if d := gohcl.DecodeExpression(a.Expr, nil, &s); d.HasErrors() {
				return "", nil, fmt.Errorf("backend %q: %s: %s", typ, name, d.Error())
			}
			settings[name] = s
		}
	}
	return typ, settings, nil
}

// acquire locks the state when asked to; the returned func unlocks.
func (m *meta) acquire(ctx context.Context, b state.Backend, lf lockFlags, op string) (func(), bool) {
	if !lf.lock {
		return func() {}, true
	}
	info := state.NewLockInfo(op, Version)
	id, err := state.LockWait(ctx, b, info, lf.timeout)
	var le *state.LockError
	if errors.As(err, &le) && le.Info.HolderGone() {
		// The holder was a pondctl on this host that no longer runs (killed
		// mid-command): its lock protects nothing.
		fmt.Fprintf(m.stderr, "Warning: reclaiming the state lock %s left by process %d, which is no longer running.\n", le.Info.ID, le.Info.PID)
		if ferr := b.ForceUnlock(ctx, le.Info.ID); ferr == nil {
			id, err = state.LockWait(ctx, b, info, lf.timeout)
		}
	}
	if err != nil {
		m.fail("Error acquiring the state lock", fmt.Errorf("%w\n\nPond acquires a state lock to protect the state from being written by multiple users at the same time. Please resolve the issue above and try again. For most commands, you can disable locking with the \"-lock=false\" flag, but this is not recommended", err))
		return nil, false
	}
	return func() {
		if err := b.Unlock(context.WithoutCancel(ctx), id); err != nil {
			m.fail("Error releasing the state lock", err)
		}
	}, true
}

// lockedState opens the configuration's backend, takes the state lock for
// op (as lf says) and reads the stored state. The returned func unlocks.
func (m *meta) lockedState(ctx context.Context, cfg *config.Config, lf lockFlags, op string) (state.Backend, *state.State, func(), bool) {
	b, err := m.backendFor(ctx, cfg)
	if err != nil {
		m.fail("Invalid backend configuration", err)
		return nil, nil, nil, false
	}
	unlock, ok := m.acquire(ctx, b, lf, op)
	if !ok {
		return nil, nil, nil, false
	}
	prior, ok := m.readState(ctx, b)
	if !ok {
		unlock()
		return nil, nil, nil, false
	}
	return b, prior, unlock, true
}

// readState reads the stored state, or a new empty one.
func (m *meta) readState(ctx context.Context, b state.Backend) (*state.State, bool) {
	s, err := b.Read(ctx)
	if err != nil {
		m.fail("Failed to load state", err)
		return nil, false
	}
	if s == nil {
		s = state.New()
	}
	return s, true
}

// seaAddr is the sea address from -sea, POND_SEA_ADDR or the pond block.
func (m *meta) seaAddr(flagVal string, cfg *config.Config) string {
	if flagVal != "" {
		return flagVal
	}
	if v := m.getenv("POND_SEA_ADDR"); v != "" {
		return v
	}
	if cfg != nil && cfg.Pond != nil && cfg.Pond.Sea != nil {
		return cfg.Pond.Sea.Address
	}
	return ""
}

// engine makes a planner engine for the configuration.
func (m *meta) engine(cfg *config.Config, vars map[string]cty.Value, sea string, hooks planner.Hooks) *planner.Engine {
	return planner.New(planner.Options{
		Config:        cfg,
		Vars:          vars,
		Functions:     funcs.Functions(cfg.Dir),
		Providers:     providerRegistry(),
		ResourceTypes: resourceTypes,
		DataTypes:     dataTypes,
		SeaAddr:       sea,
		FactoryPools:  factoryPools(cfg),
		Logger:        m.logger,
		Hooks:         hooks,
		HashKey:       m.hashKey(cfg),
	})
}

// hashKey returns the function that gives the working directory's key of
// the hashes of sensitive values, creating it (.pond/hash.key) the first
// time it is needed.
func (m *meta) hashKey(cfg *config.Config) func() ([]byte, error) {
	dir := m.dir
	if cfg != nil && cfg.Dir != "" {
		dir = cfg.Dir
	}
	return sync.OnceValues(func() ([]byte, error) { return providers.HashKey(dir) })
}

// configHash fingerprints the configuration files, so that a saved plan
// made from other sources is refused.
func configHash(cfg *config.Config) string {
	names := make([]string, 0, len(cfg.Files))
	for n := range cfg.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(n), len(cfg.Files[n].Bytes))
		h.Write(cfg.Files[n].Bytes)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// isTerminal reports whether r is an interactive terminal.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd())
}

// statePersister writes states to a backend as apply goes, incrementing the
// serial whenever the content changes, and recording the command's changes
// in the state's history.
type statePersister struct {
	b    state.Backend
	last *state.State
	// history records the writes; nil to leave the history as s has it.
	history *historyRecorder
}

// WriteState implements planner.StateWriter.
func (p *statePersister) WriteState(ctx context.Context, s *state.State) error {
	s.Lineage = p.last.Lineage
	s.PondVersion = Version
	s.Serial = p.last.Serial
	if p.history != nil {
		p.history.record(s)
	}
	if !state.PrepareWrite(p.last, s) {
		return nil
	}
	if err := p.b.Write(ctx, s); err != nil {
		return err
	}
	p.last = s
	return nil
}

func (m *meta) printJSON(v any) int {
	enc := json.NewEncoder(m.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return m.fail("Cannot print JSON", err)
	}
	return 0
}

// loadStateOnly reads the state of the working directory's backend.
func (m *meta) loadStateOnly(ctx context.Context) (state.Backend, *state.State, bool) {
	cfg, _ := config.LoadDir(m.dir, loadOptions())
	b, err := m.backendFor(ctx, cfg)
	if err != nil {
		m.fail("Invalid backend configuration", err)
		return nil, nil, false
	}
	s, ok := m.readState(ctx, b)
	return b, s, ok
}

func (m *meta) confirm(question, detail string) bool {
	fmt.Fprintf(m.stdout, "\n%s\n  %s\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ", m.col().bold(question), detail)
	line, _ := bufio.NewReader(m.stdin).ReadString('\n')
	fmt.Fprintln(m.stdout)
	return strings.TrimSpace(line) == "yes"
}

// relPath returns p relative to the working directory when it is under
// it (as Terraform names files), else p unchanged.
func (m *meta) relPath(p string) string {
	if !filepath.IsAbs(p) {
		return p
	}
	rel, err := filepath.Rel(m.dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return p
	}
	return rel
}
