package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
)

// savedBackendFile is where init keeps the backend settings its
// -backend-config flags gave, relative to the working directory. Every
// later command merges them into the configuration's backend block, as
// Terraform does with the settings it keeps under .terraform.
const savedBackendFile = ".pond/backend.json"

// savedBackend is the backend settings init was given on its command
// line, for the backend type the configuration had then.
type savedBackend struct {
	Type   string            `json:"type"`
	Config map[string]string `json:"config"`
}

// readSavedBackend returns the settings init saved in dir, nil when it
// saved none.
func readSavedBackend(dir string) (*savedBackend, error) {
	p := filepath.Join(dir, savedBackendFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the backend settings init saved: %w", err)
	}
	var sb savedBackend
	if err := json.Unmarshal(data, &sb); err != nil {
		return nil, fmt.Errorf("%s: not the backend settings pondctl init saves (%w): run \"pondctl init -reconfigure\"", p, err)
	}
	return &sb, nil
}

// writeSavedBackend saves sb in dir, readable by its owner only (the
// settings may hold credentials); a nil or empty sb removes the file.
func writeSavedBackend(dir string, sb *savedBackend) error {
	p := filepath.Join(dir, savedBackendFile)
	if sb == nil || len(sb.Config) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the saved backend settings: %w", err)
		}
		return nil
	}
	if err := providers.PrivateDir(filepath.Dir(p)); err != nil {
		return err
	}
	data, err := json.MarshalIndent(sb, "", "  ")
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("saving the backend settings: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("saving the backend settings: %w", err)
	}
	return nil
}

// backendConfigFlags is init's repeatable -backend-config: KEY=VALUE, or
// the path of a file of KEY = VALUE attributes (HCL), relative to the
// working directory.
type backendConfigFlags []string

func (b *backendConfigFlags) String() string { return strings.Join(*b, ",") }

func (b *backendConfigFlags) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("empty -backend-config: give KEY=VALUE or a file")
	}
	*b = append(*b, v)
	return nil
}

// settings returns the settings the flags give, in order (a later flag
// wins), reading files relative to dir. Errors name the flag or the file
// (file:line:col).
func (b backendConfigFlags) settings(dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range b {
		if k, val, ok := strings.Cut(v, "="); ok {
			k = strings.TrimSpace(k)
			if k == "" || !hclsyntax.ValidIdentifier(k) {
				return nil, fmt.Errorf("-backend-config=%q: %q is not a setting name (want KEY=VALUE or a file)", v, k)
			}
			out[k] = val
			continue
		}
		p := v
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("-backend-config=%q: neither KEY=VALUE nor a readable file: %w", v, err)
		}
		if d := config.CheckNesting(src, v); d.HasErrors() {
			return nil, fmt.Errorf("-backend-config: %s", d.Error())
		}
		f, d := hclsyntax.ParseConfig(src, v, hcl.InitialPos)
		if d.HasErrors() {
			return nil, fmt.Errorf("-backend-config: %s", d.Error())
		}
		attrs, d := f.Body.JustAttributes()
		if d.HasErrors() {
			return nil, fmt.Errorf("-backend-config: %s", d.Error())
		}
		names := make([]string, 0, len(attrs))
		for n := range attrs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a := attrs[n]
			val, d := a.Expr.Value(nil)
			if d.HasErrors() {
				return nil, fmt.Errorf("-backend-config: %s", d.Error())
			}
			s, err := convert.Convert(val, cty.String)
			if err != nil || s.IsNull() || !s.IsKnown() {
				return nil, fmt.Errorf("-backend-config: %s: %s: want a string, number or bool", a.Range, n)
			}
			out[n] = s.AsString()
		}
	}
	return out, nil
}

// mergeSaved merges the settings init saved for typ over settings.
func mergeSaved(settings map[string]string, sb *savedBackend, typ string) map[string]string {
	if sb == nil || sb.Type != typ {
		return settings
	}
	out := maps.Clone(settings)
	maps.Copy(out, sb.Config)
	return out
}
