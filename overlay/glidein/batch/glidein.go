package batch

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// ScriptName is the batch script in a glidein's directory.
const ScriptName = "glidein.sh"

var (
	// idRE is what a glidein ID is.
	idRE = regexp.MustCompile(`^` + regexp.QuoteMeta(glidein.IDPrefix) + `[A-Za-z0-9-]+$`)
	// envRE is an environment variable's name.
	envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// CheckID says what is wrong with a glidein ID: the batch systems' job
// names, and the directories under the work directory, are made of it.
func CheckID(id string) error {
	if len(id) > 64 || !idRE.MatchString(id) {
		return fmt.Errorf("glidein id %q: %s, then letters, digits and '-', at most 64 characters", id, glidein.IDPrefix)
	}
	return nil
}

// IsEnvName reports whether name is an environment variable's name.
func IsEnvName(name string) bool { return envRE.MatchString(name) }

// CheckRequest says what is wrong with req whatever the batch system:
// its ID, binary, sizes, environment, arguments, and the names of its
// files (CheckFiles, outputPrefix the start of its jobs' output files).
func CheckRequest(req glidein.Request, outputPrefix string) error {
	if err := CheckID(req.ID); err != nil {
		return err
	}
	if req.Binary == "" {
		return fmt.Errorf("glidein %s: no binary", req.ID)
	}
	if req.Lifetime < 0 || req.CPUs < 0 || req.MemoryMB < 0 {
		return fmt.Errorf("glidein %s: lifetime, cpus and memory may not be negative", req.ID)
	}
	for k := range req.Env {
		if !IsEnvName(k) {
			return fmt.Errorf("glidein %s: env %q is not a variable name", req.ID, k)
		}
	}
	for _, a := range req.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("glidein %s: argument %q holds NUL", req.ID, a)
		}
	}
	return CheckFiles(req.ID, req.Files, outputPrefix)
}

// CheckFiles says what is wrong with the names of a glidein's files: each
// a plain name, not the batch script, not a hidden file (the
// submission's lock), and not one starting with outputPrefix ("slurm-"),
// the output of the glidein's jobs, by which a job that ran is known.
func CheckFiles(id string, files map[string][]byte, outputPrefix string) error {
	for name := range files {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") ||
			name == ScriptName || strings.HasPrefix(name, outputPrefix) || strings.HasPrefix(name, ".") {
			return fmt.Errorf("glidein %s: file %q: a plain name other than %s, %s* and .*", id, name, ScriptName, outputPrefix)
		}
	}
	return nil
}

// Script is the batch script of a glidein whose directory is dir and
// binary bin: the batch system's extra option lines (extra), the
// environment, when the batch system ends the job (endSeconds after it
// starts, when more than 0), then the binary with its arguments ({dir}
// in one is dir).
func Script(req glidein.Request, dir, bin string, extra []string, endSeconds int) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, l := range extra {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(&b, "# pond glidein %s, written by pondctl.\n", req.ID)
	b.WriteString("PATH=/usr/local/bin:/usr/bin:/bin; export PATH\n")
	env := map[string]string{
		"POND_GLIDEIN_ID":  req.ID,
		"POND_GLIDEIN_DIR": dir,
	}
	for k, v := range req.Env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s; export %s\n", k, remote.ShellQuote(env[k]), k)
	}
	if endSeconds > 0 {
		// When the batch system ends the job: it started just now.
		fmt.Fprintf(&b, "%[1]s=$(( $(date +%%s) + %[2]d )); export %[1]s\n", glidein.EndEnv, endSeconds)
	}
	fmt.Fprintf(&b, "cd %s || exit 1\n", remote.ShellQuote(dir))
	b.WriteString("exec " + remote.ShellQuote(bin))
	for _, a := range req.Args {
		b.WriteString(" " + remote.ShellQuote(strings.ReplaceAll(a, "{dir}", dir)))
	}
	b.WriteString("\n")
	return b.String()
}

// Inflight is the glidein IDs a Submit, Cancel or WriteFiles of a site
// works on, so that two of them do not work on one glidein at once. Its
// zero value is empty and ready.
type Inflight struct {
	mu  sync.Mutex
	ids map[string]bool
}

// Lock marks id as worked on; it fails when it already is.
func (f *Inflight) Lock(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ids[id] {
		return false
	}
	if f.ids == nil {
		f.ids = map[string]bool{}
	}
	f.ids[id] = true
	return true
}

// Unlock marks id as no longer worked on.
func (f *Inflight) Unlock(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ids, id)
}

// Or is a, or b when a is the zero value: a request's setting, or the
// site's default.
func Or[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// Limit is how long a glidein's job may run: the shorter of its lifetime
// and the site's limit, or whichever is set (0: neither).
func Limit(lifetime, site time.Duration) time.Duration {
	if lifetime > 0 && site > 0 {
		return min(lifetime, site)
	}
	return Or(lifetime, site)
}

// LockWait marks id as worked on as soon as it no longer is (a Submit of
// it under way: its Cancel cancels what it submits), or fails when ctx
// ends first.
func (f *Inflight) LockWait(ctx context.Context, id string) error {
	for !f.Lock(id) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// RemoveDir removes a cancelled glidein's directory dir once the batch
// system no longer runs its job: the glidein writes into it until it is
// gone (its status on leaving, its daemons' files). It asks live every
// poll until it says no (or fails) or wait passed, then removes dir,
// again for a while should something still write into it (ENOTEMPTY).
func RemoveDir(ctx context.Context, fs FS, dir string, live func(context.Context) (bool, error), wait, poll time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		l, err := live(ctx)
		if err != nil || !l || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
	var err error
	for range 20 {
		if err = fs.RemoveAll(ctx, dir); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("removing its directory: %w", err)
}

// Command is one batch system command a site runs: its name in a
// provider block's commands map, and where its path goes.
type Command struct {
	Name string
	Path *string
}

// SetCommands sets the paths of cmds from a provider block's commands
// map (name to path), given; a name that is none of cmds is the
// setting's error, saying which of system's commands pond uses.
func SetCommands(system string, given map[string]string, cmds ...Command) error {
	for k, v := range given {
		i := slices.IndexFunc(cmds, func(c Command) bool { return c.Name == k })
		if i < 0 {
			names := make([]string, len(cmds))
			for j, c := range cmds {
				names[j] = c.Name
			}
			return glidein.SettingErrorf("commands", "%q is not a %s command pond uses (%s)", k, system, strings.Join(names, ", "))
		}
		*cmds[i].Path = v
	}
	return nil
}

// Stage readies a glidein's directory dir for its submission, its ID
// locked: it refuses (glidein.ErrDuplicate) an ID of which jobs finds a
// job of the batch system's (system, its name) or whose job left its
// output (outputPattern) in dir, copies the binary (once), writes dir
// with the request's files, and the batch script that script makes for
// the installed binary. It returns the script's path.
func Stage(ctx context.Context, fs FS, system string, req glidein.Request, dir, outputPattern string,
	jobs func(context.Context, string) ([]string, error), script func(bin string) string) (string, error) {
	found, err := jobs(ctx, req.ID)
	if err != nil {
		return "", fmt.Errorf("glidein %s: looking for it before submitting: %w", req.ID, err)
	}
	if len(found) > 0 {
		return "", fmt.Errorf("glidein %s is %s job %s: %w", req.ID, system, strings.Join(found, ", "), glidein.ErrDuplicate)
	}
	// A job that ran under this ID, ended and was forgotten by the batch
	// system left its output in the directory, which Cancel has not
	// removed yet.
	out, err := fs.RanAlready(ctx, dir, outputPattern)
	if err != nil {
		return "", fmt.Errorf("glidein %s: %w", req.ID, err)
	}
	if out != "" {
		return "", fmt.Errorf("glidein %s ran already (%s): %w", req.ID, out, glidein.ErrDuplicate)
	}
	bin, err := fs.InstallBinary(ctx, req.Binary)
	if err != nil {
		return "", fmt.Errorf("glidein %s: %w", req.ID, err)
	}
	if err := fs.WriteDir(ctx, dir, req.Files); err != nil {
		return "", fmt.Errorf("glidein %s: %w", req.ID, err)
	}
	path := filepath.Join(dir, ScriptName)
	if err := fs.WriteFile(ctx, path, []byte(script(bin))); err != nil {
		return "", fmt.Errorf("glidein %s: %w", req.ID, err)
	}
	return path, nil
}

// CommandString is a command as an error shows it: its path and
// arguments, a script of the site's own (sh -c SCRIPT NAME ARGS...) as
// what it ran rather than its text.
func CommandString(path string, args []string) string {
	if path == "/bin/sh" && len(args) > 2 && args[0] == "-c" {
		path, args = "sh -c SCRIPT", args[2:]
	}
	return strings.Join(append([]string{path}, args...), " ")
}

// DefaultCommands sets the path of each of cmds that is empty to its
// name: found in PATH where the commands run.
func DefaultCommands(cmds ...Command) {
	for _, c := range cmds {
		if *c.Path == "" {
			*c.Path = c.Name
		}
	}
}
