package machinead

import (
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/overlay/api"
)

// attrFile holds the operator's machine attributes from the agent's
// configuration file (the attributes STARTD_ATTRS names, with their
// values), read again whenever the file changes, so that an edit reaches
// the machine ad the sea matches against without a restart. It is not
// safe for concurrent use.
type attrFile struct {
	path  string
	mod   time.Time
	size  int64
	attrs map[string]any
	err   error
}

// load returns the attributes, re-reading the file if its modification
// time or size changed, and reports whether it did. If the file cannot be
// read or parsed, the attributes last read stay in force and the error is
// returned.
func (f *attrFile) load() (map[string]any, bool, error) {
	if f.path == "" {
		return nil, false, nil
	}
	fi, err := os.Stat(f.path)
	if err != nil {
		return f.attrs, false, err
	}
	if fi.ModTime().Equal(f.mod) && fi.Size() == f.size {
		return f.attrs, false, f.err
	}
	f.mod, f.size = fi.ModTime(), fi.Size()
	cfg, err := config.Load(f.path)
	if err != nil {
		f.err = err
		return f.attrs, true, err
	}
	if err := RefuseSecretAttrs(cfg.Get); err != nil {
		f.err = err
		return f.attrs, true, err
	}
	attrs := map[string]any{}
	names, _ := cfg.Get("STARTD_ATTRS")
	for _, name := range strings.FieldsFunc(names, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		if !api.ValidAttrName(name) {
			continue
		}
		if v, ok := cfg.Get(name); ok {
			attrs[name] = api.ParseAttrValue(v)
		}
	}
	f.attrs, f.err = attrs, nil
	return attrs, true, nil
}
