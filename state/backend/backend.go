// Package backend builds the state.Backend a configuration's
// `backend "TYPE" { ... }` block asks for.
package backend

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/state"
	"github.com/pond-htc/pond/state/backend/local"
	"github.com/pond-htc/pond/state/backend/s3"
)

// Backend types.
const (
	TypeLocal = "local"
	TypeS3    = "s3"
)

// Types lists the known backend types.
func Types() []string { return []string{TypeLocal, TypeS3} }

// settings returns the settings a backend type accepts, the required ones
// marked true; nil for an unknown type.
func settings(typ string) map[string]bool {
	switch typ {
	case TypeLocal:
		return map[string]bool{"path": false}
	case TypeS3:
		return map[string]bool{
			"bucket": true, "key": true, "region": false, "endpoint": false, "profile": false,
			"force_path_style": false, "access_key": false, "secret_key": false, "token": false,
		}
	}
	return nil
}

// New returns the backend of type typ ("" means local) configured by cfg.
// A relative local path is taken relative to workDir. Unknown types, unknown
// or missing settings and malformed values are errors naming the setting.
func New(ctx context.Context, typ string, cfg map[string]string, workDir string) (state.Backend, error) {
	if typ == "" {
		typ = TypeLocal
	}
	known := settings(typ)
	if known == nil {
		return nil, fmt.Errorf("unknown backend type %q: pond has %s", typ, strings.Join(quoted(Types()), " and "))
	}
	for k := range cfg {
		if _, ok := known[k]; !ok {
			return nil, fmt.Errorf("backend %q: unknown setting %q (settings: %s)", typ, k, strings.Join(sortedKeys(known), ", "))
		}
	}
	for _, k := range sortedKeys(known) {
		if known[k] && strings.TrimSpace(cfg[k]) == "" {
			return nil, fmt.Errorf("backend %q: setting %q is required", typ, k)
		}
	}
	switch typ {
	case TypeLocal:
		p := cfg["path"]
		if p == "" {
			p = local.DefaultPath
		}
		if !filepath.IsAbs(p) && workDir != "" {
			p = filepath.Join(workDir, p)
		}
		return local.New(p), nil
	case TypeS3:
		c := s3.Config{
			Bucket: cfg["bucket"], Key: cfg["key"], Region: cfg["region"], Endpoint: cfg["endpoint"],
			Profile: cfg["profile"], AccessKey: cfg["access_key"], SecretKey: cfg["secret_key"],
			SessionToken: cfg["token"],
		}
		if v, ok := cfg["force_path_style"]; ok && v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("backend %q: setting \"force_path_style\" is %q, want true or false", typ, v)
			}
			c.ForcePathStyle = b
		}
		if strings.HasPrefix(c.Key, "/") || strings.HasSuffix(c.Key, "/") {
			return nil, fmt.Errorf("backend %q: setting \"key\" is %q: it must not begin or end with /", typ, c.Key)
		}
		b, err := s3.New(ctx, c)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown backend type %q", typ)
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
