package glidein

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zclconf/go-cty/cty"
)

// Kind is one kind of site (Slurm, SSH hosts, EC2): everything pond needs
// to know of it beyond the Site it makes. Each kind is one package
// (overlay/glidein/slurm, ssh, ec2) whose Kind function returns it, and
// the table in overlay/glidein/kinds lists them: the provider of the
// same name (providers/glidein) reads its block with Provider and makes
// its site with New; a pilot factory makes an entry's site again with
// Open from what the site's Describe gave.
type Kind struct {
	// Name is the kind's name: the provider's name ("slurm"), the
	// site's Kind, a factory entry's site.kind.
	Name string
	// Provider is the provider block's own description, arguments and
	// nested blocks, beside those every glidein provider has; an argument
	// of the same name as a common one replaces it (a kind-specific
	// description of binary).
	Provider Block
	// Budget reports that the provider block takes max_instances and
	// max_hourly_cost for all its glideins together: the kind's sites
	// have offers with prices (an Offerer), so a cost can be checked.
	Budget bool
	// New makes the site of a provider block. settings is the block's
	// own arguments and nested blocks (those of Provider, not the common
	// ones) as a JSON object, by name, as decoded against Provider: a
	// null or unknown value is null, a nested block an object (or a list
	// of them), a duration its string. An error about one argument is a
	// *SettingError naming it (TYPE[i].NAME for one of a nested block),
	// which the provider shows at that argument.
	New func(ctx context.Context, settings json.RawMessage, env KindEnv) (Site, error)
	// Open makes a site again from its description (Describer: a pilot
	// factory entry's site.config), decoding it strictly (DecodeConfig).
	// Nil for a kind whose sites do not describe themselves: its
	// glideins cannot be kept by a pilot factory.
	Open func(ctx context.Context, config json.RawMessage, env KindEnv) (Site, error)
	// Labels reports that the kind's sites label what they start with the
	// state lineage and resource address of a Request (EC2's tags). A
	// factory entry of another kind carries neither, so that it stays the
	// same when its glideins are imported into another state.
	Labels bool
	// FetchesFiles reports that a glidein of the kind fetches its files
	// into its directory itself (EC2's from SSM, with -credentials) and
	// keeps its data there; others keep their data in a data directory
	// beside their files.
	FetchesFiles bool
}

// KindEnv is what a Kind's New and Open are given beside a site's settings.
type KindEnv struct {
	// Logger receives what the site's SDK logs (EC2's); nil discards it.
	Logger *slog.Logger
	// Binary is the local pondctl binary glideins are started with (the
	// provider's binary argument, $POND_BIN or this executable), which
	// an SSH site checks its hosts' architecture against; "" means this
	// program.
	Binary string
	// Shared holds what the sites of one process share (one cache of
	// EC2's spot price history for every factory entry); nil shares
	// nothing.
	Shared *Shared
}

// Block describes a provider block, or a block nested in one, in the
// terms the provider's schema needs.
type Block struct {
	// Description says what the block is for, in one sentence.
	Description string
	// Settings are its arguments, by name.
	Settings map[string]Setting
	// Blocks are the blocks nested in it, by type.
	Blocks map[string]NestedBlock
}

// Setting is one argument of a Block.
type Setting struct {
	// Type is its type (cty.String, cty.List(cty.String), ...).
	Type cty.Type
	// Required and Sensitive: an argument that must be given; one whose
	// value is never shown.
	Required, Sensitive bool
	// Description says what it does and its default.
	Description string
}

// NestedBlock is a block type nested in a Block.
type NestedBlock struct {
	// List reports that the block may be given any number of times (a
	// list of objects in the settings); otherwise at most once (an
	// object, or null).
	List bool
	// Block is the nested block's own description.
	Block Block
}

// Shared holds values the sites of one process share, by key, each made
// once. Its methods may be called concurrently; a nil *Shared shares
// nothing.
type Shared struct {
	mu sync.Mutex
	m  map[string]any
}

// Get returns the value kept under key, made by mk the first time.
func (s *Shared) Get(key string, mk func() any) any {
	if s == nil {
		return mk()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[key]; ok {
		return v
	}
	if s.m == nil {
		s.m = map[string]any{}
	}
	v := mk()
	s.m[key] = v
	return v
}

// Registry is a set of kinds of sites by name: the kinds a program is
// built with (overlay/glidein/kinds.Registry).
type Registry struct {
	kinds map[string]Kind
}

// NewRegistry returns the registry of kinds. A kind with no name, no New,
// or a name given twice, is an error of the program, which panics: the
// table is fixed when the program is built.
func NewRegistry(kinds ...Kind) *Registry {
	r := &Registry{kinds: map[string]Kind{}}
	for _, k := range kinds {
		if k.Name == "" || k.New == nil {
			panic(fmt.Sprintf("glidein: kind %q has no name or no New", k.Name))
		}
		if _, dup := r.kinds[k.Name]; dup {
			panic(fmt.Sprintf("glidein: kind %q registered twice", k.Name))
		}
		r.kinds[k.Name] = k
	}
	return r
}

// Lookup returns the kind named name.
func (r *Registry) Lookup(name string) (Kind, bool) {
	k, ok := r.kinds[name]
	return k, ok
}

// Names returns the names of the kinds, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.kinds))
	for n := range r.kinds {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Open makes the site a pilot factory entry names: its kind and its
// configuration, as the site's Describe gave it.
func (r *Registry) Open(ctx context.Context, kind string, config json.RawMessage, env KindEnv) (Site, error) {
	k, ok := r.kinds[kind]
	if !ok || k.Open == nil {
		var can []string
		for _, n := range r.Names() {
			if r.kinds[n].Open != nil {
				can = append(can, n)
			}
		}
		return nil, fmt.Errorf("site.kind %q: want %s", kind, orList(can))
	}
	s, err := k.Open(ctx, config, env)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// DecodeConfig decodes a site's JSON description (a factory entry's
// site.config) into v, refusing a field v has not: a description written
// by a newer pondctl, or by hand, is not half read. Empty data leaves v
// as it is. Its error names site.config.
func DecodeConfig(data json.RawMessage, v any) error {
	if err := decodeStrict(data, v); err != nil {
		return fmt.Errorf("site.config: %w", err)
	}
	return nil
}

// DecodeSettings decodes the settings a Kind's New is given into v,
// refusing a field v has not (an argument of Provider the kind forgot to
// read).
func DecodeSettings(data json.RawMessage, v any) error {
	if err := decodeStrict(data, v); err != nil {
		return fmt.Errorf("the provider block's settings: %w", err)
	}
	return nil
}

func decodeStrict(data json.RawMessage, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// SettingErrorf is a *SettingError about setting, whose text is the
// setting's name, then the formatted message.
func SettingErrorf(setting, format string, args ...any) error {
	return &SettingError{Setting: setting, Err: fmt.Errorf(setting+": "+format, args...)}
}

// DurationSetting reads the duration setting name from its text v ("30m",
// "4h"; "" for unset, which is def) that must be at least least.
func DurationSetting(name, v string, def, least time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, SettingErrorf(name, "%q is not a duration such as \"30m\" or \"4h\"", v)
	}
	if d < least {
		if least == 0 {
			return 0, SettingErrorf(name, "%q is negative", v)
		}
		return 0, SettingErrorf(name, "%q is less than %s", v, least)
	}
	return d, nil
}

// orList is names as English says them: "a", "a or b", "a, b or c".
func orList(names []string) string {
	switch len(names) {
	case 0:
		return "none: this program is built with no kind of site that a factory can keep"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
