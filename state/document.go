package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// ErrNewerFormat is wrapped by the error Decode returns for a document whose
// format_version is newer than FormatVersion.
var ErrNewerFormat = errors.New("state format is newer than this pond reads")

// ErrNewerPond is wrapped by the error Decode returns for a document whose
// pond_version is a newer release than PondVersion.
var ErrNewerPond = errors.New("state was written by a newer pond")

// New returns an empty state with a fresh lineage and serial 0.
func New() *State {
	return &State{
		FormatVersion: FormatVersion,
		Lineage:       uuid.NewString(),
		Outputs:       map[string]*Output{},
		Resources:     []*Resource{},
	}
}

// DecodeError reports why a state document could not be read, and where.
type DecodeError struct {
	// Source names the document, usually its file name.
	Source string
	// Line and Column locate the problem, 1-based; 0 when unknown.
	Line, Column int
	// Path is the location in the document, such as
	// "resources[2].instances[0]"; "" for the whole document.
	Path string
	// Err is the reason.
	Err error
}

// Error formats the error as source:line:col: path: reason.
func (e *DecodeError) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the reason.
func (e *DecodeError) Unwrap() error { return e.Err }

// The wire types use pointers to tell missing fields from zero values.
type wireState struct {
	FormatVersion *int                   `json:"format_version"`
	PondVersion   string                 `json:"pond_version"`
	Serial        *uint64                `json:"serial"`
	Lineage       *string                `json:"lineage"`
	Outputs       map[string]*wireOutput `json:"outputs"`
	Resources     []*wireResource        `json:"resources"`
	History       json.RawMessage        `json:"history"`
	CheckResults  json.RawMessage        `json:"check_results"`
}

type wireResource struct {
	Mode      *string          `json:"mode"`
	Type      *string          `json:"type"`
	Name      *string          `json:"name"`
	Provider  *string          `json:"provider"`
	Instances *[]*wireInstance `json:"instances"`
}

type wireInstance struct {
	IndexKey            any               `json:"index_key"`
	SchemaVersion       int               `json:"schema_version"`
	Attributes          json.RawMessage   `json:"attributes"`
	SensitiveAttributes []string          `json:"sensitive_attributes"`
	SensitiveValues     map[string]string `json:"sensitive_values"`
	Dependencies        []string          `json:"dependencies"`
	Status              string            `json:"status"`
	CreateBeforeDestroy bool              `json:"create_before_destroy"`
}

type wireOutput struct {
	Value     json.RawMessage `json:"value"`
	Type      json.RawMessage `json:"type"`
	Sensitive bool            `json:"sensitive"`
	Hash      string          `json:"hash"`
}

// Decode parses a state document. source names it in errors (a file name).
// Truncated or corrupt JSON, missing or invalid fields and duplicate
// addresses are reported as a *DecodeError giving line:col; a newer
// format_version is refused with an error wrapping ErrNewerFormat, and a
// newer pond_version with an error wrapping ErrNewerPond.
func Decode(data []byte, source string) (*State, error) {
	d := decoder{data: data, source: source}
	return d.decode()
}

type decoder struct {
	data   []byte
	source string
}

// fail builds a DecodeError located at the JSON value reached by path.
func (d *decoder) fail(path []any, err error) error {
	line, col := 0, 0
	if off, ok := offsetOf(d.data, path); ok {
		line, col = lineCol(d.data, off)
	}
	return &DecodeError{Source: d.source, Line: line, Column: col, Path: pathString(path), Err: err}
}

func (d *decoder) failAt(off int64, err error) error {
	line, col := lineCol(d.data, off)
	return &DecodeError{Source: d.source, Line: line, Column: col, Err: err}
}

func (d *decoder) decode() (*State, error) {
	if len(bytes.TrimSpace(d.data)) == 0 {
		return nil, &DecodeError{Source: d.source, Err: errors.New("state document is empty")}
	}
	var w wireState
	if !scanDocument(d.data, &w) {
		w = wireState{}
		if err := json.Unmarshal(d.data, &w); err != nil {
			// A newer format may have a different shape: report the version
			// rather than the shape when the version says so.
			if v, ok := d.probeVersion(); ok && v > FormatVersion {
				return nil, d.newer(v)
			}
			return nil, d.jsonError(err)
		}
	}
	if w.FormatVersion == nil {
		return nil, d.fail(nil, errors.New(`missing "format_version"`))
	}
	if v := *w.FormatVersion; v > FormatVersion {
		return nil, d.newer(v)
	} else if v < 1 {
		return nil, d.fail([]any{"format_version"}, fmt.Errorf("invalid format_version %d", v))
	}
	if newerRelease(w.PondVersion, PondVersion) {
		return nil, d.fail([]any{"pond_version"}, newerPondError(w.PondVersion))
	}
	if w.Serial == nil {
		return nil, d.fail(nil, errors.New(`missing "serial"`))
	}
	if w.Lineage == nil || *w.Lineage == "" {
		return nil, d.fail(nil, errors.New(`missing "lineage"`))
	}
	s := &State{
		FormatVersion: *w.FormatVersion,
		PondVersion:   w.PondVersion,
		Serial:        *w.Serial,
		Lineage:       *w.Lineage,
		Outputs:       make(map[string]*Output, len(w.Outputs)),
		Resources:     make([]*Resource, 0, len(w.Resources)),
	}
	for name, o := range w.Outputs {
		out, err := d.output(name, o)
		if err != nil {
			return nil, err
		}
		s.Outputs[name] = out
	}
	seen := make(map[Address]bool, len(w.Resources))
	for i, wr := range w.Resources {
		r, err := d.resource(i, wr, seen)
		if err != nil {
			return nil, err
		}
		s.Resources = append(s.Resources, r)
	}
	if err := d.history(s, w.History); err != nil {
		return nil, err
	}
	if err := d.checkResults(s, w.CheckResults); err != nil {
		return nil, err
	}
	return s, nil
}

// history decodes and checks the document's history, when it has one.
func (d *decoder) history(s *State, raw json.RawMessage) error {
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, &s.History); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			err = fmt.Errorf("%s: cannot use a JSON %s here, want %s", typ.Field, typ.Value, friendlyType(typ.Type.String()))
		}
		return d.fail([]any{"history"}, fmt.Errorf("invalid history: %w", err))
	}
	for _, r := range s.History {
		if r != nil {
			r.Time = r.Time.UTC()
		}
	}
	return checkHistory(s.History, d.fail)
}

// output checks and converts the output called name.
func (d *decoder) output(name string, o *wireOutput) (*Output, error) {
	p := []any{"outputs", name}
	if o == nil {
		return nil, d.fail(p, errors.New("output is null"))
	}
	if !validIdentifier(name) {
		return nil, d.fail(p, fmt.Errorf("invalid output name %q", name))
	}
	if o.Value == nil {
		return nil, d.fail(p, errors.New(`missing "value"`))
	}
	return &Output{Value: compactRaw(o.Value), Type: compactRaw(o.Type), Sensitive: o.Sensitive, Hash: o.Hash}, nil
}

// resource checks and converts resource i, which must not be in seen, and
// adds its address to seen.
func (d *decoder) resource(i int, wr *wireResource, seen map[Address]bool) (*Resource, error) {
	p := []any{"resources", i}
	if wr == nil {
		return nil, d.fail(p, errors.New("resource is null"))
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"mode", wr.Mode}, {"type", wr.Type}, {"name", wr.Name}, {"provider", wr.Provider}} {
		if f.v == nil {
			return nil, d.fail(p, fmt.Errorf("missing %q", f.name))
		}
	}
	if wr.Instances == nil {
		return nil, d.fail(p, errors.New(`missing "instances"`))
	}
	r := &Resource{Mode: *wr.Mode, Type: *wr.Type, Name: *wr.Name, Provider: *wr.Provider}
	if r.Mode != ModeManaged && r.Mode != ModeData {
		return nil, d.fail(append(p, "mode"), fmt.Errorf("mode is %q, want %q or %q", r.Mode, ModeManaged, ModeData))
	}
	if !validIdentifier(r.Type) || (r.Mode == ModeManaged && (r.Type == "data" || r.Type == "module")) {
		return nil, d.fail(append(p, "type"), fmt.Errorf("invalid resource type %q", r.Type))
	}
	if !validIdentifier(r.Name) {
		return nil, d.fail(append(p, "name"), fmt.Errorf("invalid resource name %q", r.Name))
	}
	addr := r.Addr()
	if seen[addr] {
		return nil, d.fail(p, fmt.Errorf("duplicate resource %s", addr))
	}
	seen[addr] = true
	r.Instances = make([]*Instance, 0, len(*wr.Instances))
	keys := make(map[any]bool, len(*wr.Instances))
	for j, wi := range *wr.Instances {
		inst, err := d.instance(i, j, r, wi, keys)
		if err != nil {
			return nil, err
		}
		r.Instances = append(r.Instances, inst)
	}
	return r, nil
}

// instance checks and converts instance j of resource i (r), whose key
// must not be in keys nor of another kind, and adds its key to keys.
func (d *decoder) instance(i, j int, r *Resource, wi *wireInstance, keys map[any]bool) (*Instance, error) {
	ip := []any{"resources", i, "instances", j}
	if wi == nil {
		return nil, d.fail(ip, errors.New("instance is null"))
	}
	k, err := validKey(wi.IndexKey)
	if err != nil {
		return nil, d.fail(append(ip, "index_key"), err)
	}
	if keys[k] {
		return nil, d.fail(ip, fmt.Errorf("duplicate instance %s", r.InstanceAddr(k)))
	}
	if err := checkKeyKinds(keys, k); err != nil {
		return nil, d.fail(append(ip, "index_key"), fmt.Errorf("%s: %w", r.InstanceAddr(k), err))
	}
	keys[k] = true
	if wi.Attributes == nil {
		return nil, d.fail(ip, errors.New(`missing "attributes"`))
	}
	if wi.Status != "" && wi.Status != "tainted" {
		return nil, d.fail(append(ip, "status"), fmt.Errorf("status is %q, want \"\" or \"tainted\"", wi.Status))
	}
	return &Instance{
		IndexKey:            k,
		SchemaVersion:       wi.SchemaVersion,
		Attributes:          compactRaw(wi.Attributes),
		SensitiveAttributes: wi.SensitiveAttributes,
		SensitiveValues:     wi.SensitiveValues,
		Dependencies:        wi.Dependencies,
		Status:              wi.Status,
		CreateBeforeDestroy: wi.CreateBeforeDestroy,
	}, nil
}

// checkKeyKinds refuses mixing unkeyed, count and for_each instances in one
// resource.
func checkKeyKinds(keys map[any]bool, k any) error {
	for other := range keys {
		if kindOf(other) != kindOf(k) {
			return fmt.Errorf("a resource cannot have both %s and %s instances", kindOf(other), kindOf(k))
		}
		break
	}
	return nil
}

func kindOf(k any) string {
	switch k.(type) {
	case nil:
		return "unkeyed"
	case int:
		return "count"
	case string:
		return "for_each"
	}
	return fmt.Sprintf("%T", k)
}

func (d *decoder) newer(v int) error {
	e := d.fail([]any{"format_version"}, fmt.Errorf("state was written by a newer pond (format %d); this pond reads format %d: %w", v, FormatVersion, ErrNewerFormat))
	return e
}

// newerPondError explains that a document written by pond version v cannot
// be used by this build; it wraps ErrNewerPond.
type newerPondError string

func (v newerPondError) Error() string {
	return fmt.Sprintf("state was written by pondctl %s, newer than this pondctl, which writes pond_version %s; upgrade pondctl to use this state", string(v), PondVersion)
}

func (v newerPondError) Is(target error) bool { return target == ErrNewerPond }

// newerRelease reports whether version a is a later release than b. Both are
// semantic versions (MAJOR.MINOR.PATCH with an optional -prerelease and
// +build, and an optional leading "v"); a version that is not one is never
// newer, since nothing can be said of it.
func newerRelease(a, b string) bool {
	va, ok := parseRelease(a)
	if !ok {
		return false
	}
	vb, ok := parseRelease(b)
	if !ok {
		return false
	}
	for i := range 3 {
		if va.num[i] != vb.num[i] {
			return va.num[i] > vb.num[i]
		}
	}
	return comparePrerelease(va.pre, vb.pre) > 0
}

type release struct {
	num [3]uint64
	pre string
}

func parseRelease(v string) (release, bool) {
	var r release
	v = strings.TrimPrefix(v, "v")
	v, _, _ = strings.Cut(v, "+")
	v, r.pre, _ = strings.Cut(v, "-")
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return r, false
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return r, false
		}
		r.num[i] = n
	}
	return r, true
}

// comparePrerelease orders pre-release strings as semantic versioning does:
// none is later than any, numeric identifiers compare as numbers and before
// alphanumeric ones, and a longer list wins a tie.
func comparePrerelease(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		na, errA := strconv.ParseUint(as[i], 10, 64)
		nb, errB := strconv.ParseUint(bs[i], 10, 64)
		switch {
		case errA == nil && errB == nil:
			if na != nb {
				if na > nb {
					return 1
				}
				return -1
			}
		case errA == nil:
			return -1
		case errB == nil:
			return 1
		default:
			if c := strings.Compare(as[i], bs[i]); c != 0 {
				return c
			}
		}
	}
	return len(as) - len(bs)
}

func (d *decoder) probeVersion() (int, bool) {
	var p struct {
		FormatVersion json.Number `json:"format_version"`
	}
	if json.Unmarshal(d.data, &p) != nil {
		return 0, false
	}
	v, err := strconv.Atoi(p.FormatVersion.String())
	return v, err == nil
}

// jsonError turns an encoding/json error into a located DecodeError.
func (d *decoder) jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		msg := syn.Error()
		if int(syn.Offset) >= len(d.data) || strings.Contains(msg, "unexpected end") {
			return d.failAt(int64(len(d.data)), fmt.Errorf("truncated state document (%s)", msg))
		}
		// The offset counts the offending byte; point at it.
		return d.failAt(max(syn.Offset-1, 0), fmt.Errorf("corrupt state document: %s", msg))
	case errors.As(err, &typ):
		path := typ.Field
		if path == "" {
			path = "document"
		}
		return d.failAt(valueStart(d.data, typ.Offset), fmt.Errorf("%s: cannot use a JSON %s here, want %s", path, typ.Value, friendlyType(typ.Type.String())))
	}
	return &DecodeError{Source: d.source, Err: err}
}

// valueStart finds where the scalar JSON value ending at end starts; for
// other values it returns the offset of their last byte.
func valueStart(data []byte, end int64) int64 {
	end = min(end, int64(len(data)))
	i := end - 1
	if i < 0 {
		return 0
	}
	switch c := data[i]; {
	case c == '"':
		for j := i - 1; j >= 0; j-- {
			if data[j] != '"' {
				continue
			}
			bs := 0
			for k := j - 1; k >= 0 && data[k] == '\\'; k-- {
				bs++
			}
			if bs%2 == 0 {
				return j
			}
		}
	case c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '.' || c == '+' || c == '-':
		j := i
		for j > 0 {
			p := data[j-1]
			if !(p >= '0' && p <= '9' || p >= 'a' && p <= 'z' || p >= 'A' && p <= 'Z' || p == '.' || p == '+' || p == '-') {
				break
			}
			j--
		}
		return j
	}
	return i
}

func friendlyType(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "map"), strings.Contains(t, "wire"):
		return "an object"
	case strings.Contains(t, "int"):
		return "a whole number"
	case strings.Contains(t, "string"):
		return "a string"
	case strings.Contains(t, "bool"):
		return "a boolean"
	}
	return t
}

// compactRaw returns raw with insignificant whitespace removed, so that
// decoded documents compare byte for byte with freshly encoded values. raw
// must be valid JSON (as it is once json.Unmarshal accepted it); it is
// returned unchanged when already compact.
func compactRaw(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	var out []byte // nil until the first whitespace byte outside a string
	inStr, esc := false, false
	for i, c := range raw {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		} else {
			switch c {
			case ' ', '\n', '\t', '\r':
				if out == nil {
					out = make([]byte, i, len(raw))
					copy(out, raw[:i])
				}
				continue
			case '"':
				inStr = true
			}
		}
		if out != nil {
			out = append(out, c)
		}
	}
	if out == nil {
		return raw
	}
	return out
}

// offsetOf walks data along path (object keys and array indexes) and returns
// the byte offset at which the value found there starts.
func offsetOf(data []byte, path []any) (int64, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for _, step := range path {
		tok, err := dec.Token()
		if err != nil {
			return 0, false
		}
		switch step := step.(type) {
		case string:
			if tok != json.Delim('{') {
				return 0, false
			}
			found := false
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return 0, false
				}
				if k == step {
					found = true
					break
				}
				if !skipValue(dec) {
					return 0, false
				}
			}
			if !found {
				return 0, false
			}
		case int:
			if tok != json.Delim('[') {
				return 0, false
			}
			for range step {
				if !dec.More() || !skipValue(dec) {
					return 0, false
				}
			}
			if !dec.More() {
				return 0, false
			}
		}
	}
	off := dec.InputOffset()
	if len(path) == 0 {
		off = 0
	}
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ':', ',':
			off++
			continue
		}
		break
	}
	return off, true
}

func skipValue(dec *json.Decoder) bool {
	var raw json.RawMessage
	return dec.Decode(&raw) == nil
}

// lineCol converts a byte offset into a 1-based line and column (in
// characters).
func lineCol(data []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}

func pathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		}
	}
	return b.String()
}

// Encode returns the canonical JSON form of s: resources sorted by mode, type
// and name, instances by key, dependencies and sensitive attribute names
// sorted, two-space indentation and a trailing newline. The same content
// always encodes to the same bytes. s is not modified.
func Encode(s *State) ([]byte, error) {
	if s == nil {
		return nil, errors.New("encode state: nil state")
	}
	out, err := canonical(s)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	data, err := encodeCanonical(out)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	return data, nil
}

// canonical returns a sorted shallow copy of s ready to encode, validating
// addresses and keys on the way.
func canonical(s *State) (*State, error) {
	out := *s
	if out.FormatVersion == 0 {
		out.FormatVersion = FormatVersion
	}
	if out.Lineage == "" {
		return nil, errors.New("state has no lineage")
	}
	if out.Outputs == nil {
		out.Outputs = map[string]*Output{}
	}
	for name, o := range out.Outputs {
		if o == nil {
			return nil, fmt.Errorf("output %q is nil", name)
		}
	}
	out.Resources = make([]*Resource, 0, len(s.Resources))
	for _, r := range s.Resources {
		if r == nil {
			return nil, errors.New("nil resource")
		}
		if r.Mode != ModeManaged && r.Mode != ModeData {
			return nil, fmt.Errorf("resource %s: mode is %q, want %q or %q", r.Addr(), r.Mode, ModeManaged, ModeData)
		}
		rc := *r
		rc.Instances = make([]*Instance, 0, len(r.Instances))
		for _, inst := range r.Instances {
			if inst == nil {
				return nil, fmt.Errorf("resource %s: nil instance", r.Addr())
			}
			k, err := validKey(inst.IndexKey)
			if err != nil {
				return nil, fmt.Errorf("resource %s: %w", r.Addr(), err)
			}
			ic := *inst
			ic.IndexKey = k
			ic.Dependencies = sortedUnique(inst.Dependencies)
			ic.SensitiveAttributes = sortedUnique(inst.SensitiveAttributes)
			if ic.Attributes == nil {
				ic.Attributes = json.RawMessage("null")
			}
			rc.Instances = append(rc.Instances, &ic)
		}
		slices.SortFunc(rc.Instances, func(a, b *Instance) int { return compareKeys(a.IndexKey, b.IndexKey) })
		for i := 1; i < len(rc.Instances); i++ {
			if compareKeys(rc.Instances[i-1].IndexKey, rc.Instances[i].IndexKey) == 0 {
				return nil, fmt.Errorf("duplicate instance %s", r.InstanceAddr(rc.Instances[i].IndexKey))
			}
		}
		out.Resources = append(out.Resources, &rc)
	}
	for i, r := range s.History {
		if r == nil {
			return nil, fmt.Errorf("history record %d is nil", i)
		}
	}
	if err := validCheckResults(s.CheckResults, func(path []any, err error) error {
		return fmt.Errorf("%s: %w", pathString(path), err)
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(out.Resources, compareResources)
	for i := 1; i < len(out.Resources); i++ {
		if compareResources(out.Resources[i-1], out.Resources[i]) == 0 {
			return nil, fmt.Errorf("duplicate resource %s", out.Resources[i].Addr())
		}
	}
	return &out, nil
}

func compareResources(a, b *Resource) int {
	return CompareAddresses(a.Addr(), b.Addr())
}

func sortedUnique(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	if slices.IsSorted(ss) && len(slices.Compact(slices.Clone(ss))) == len(ss) {
		return ss
	}
	c := slices.Clone(ss)
	slices.Sort(c)
	return slices.Compact(c)
}

// DeepCopy returns a copy of s sharing no memory with it.
func (s *State) DeepCopy() *State {
	if s == nil {
		return nil
	}
	c := *s
	if s.Outputs != nil {
		c.Outputs = make(map[string]*Output, len(s.Outputs))
		for k, o := range s.Outputs {
			if o == nil {
				c.Outputs[k] = nil
				continue
			}
			oc := *o
			oc.Value = cloneRaw(o.Value)
			oc.Type = cloneRaw(o.Type)
			c.Outputs[k] = &oc
		}
	}
	c.Resources = deepCopyAll(s.Resources)
	c.History = deepCopyHistory(s.History)
	c.CheckResults = deepCopyCheckResults(s.CheckResults)
	return &c
}

// DeepCopy returns a copy of r sharing no memory with it.
func (r *Resource) DeepCopy() *Resource {
	if r == nil {
		return nil
	}
	c := *r
	c.Instances = deepCopyAll(r.Instances)
	return &c
}

// deepCopyAll returns a slice of deep copies of the elements of xs, nil
// when xs is nil.
func deepCopyAll[T interface{ DeepCopy() T }](xs []T) []T {
	if xs == nil {
		return nil
	}
	c := make([]T, len(xs))
	for i, x := range xs {
		c[i] = x.DeepCopy()
	}
	return c
}

// DeepCopy returns a copy of i sharing no memory with it.
func (i *Instance) DeepCopy() *Instance {
	if i == nil {
		return nil
	}
	c := *i
	c.Attributes = cloneRaw(i.Attributes)
	c.SensitiveAttributes = slices.Clone(i.SensitiveAttributes)
	c.SensitiveValues = maps.Clone(i.SensitiveValues)
	c.Dependencies = slices.Clone(i.Dependencies)
	return &c
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return slices.Clone(r)
}

// ContentEqual reports whether a and b hold the same resources, outputs and
// check results, ignoring serial, lineage, pond_version, history and the
// order of resources, instances, dependencies and sensitive attribute names. JSON values are
// compared ignoring insignificant whitespace. It decides whether a write is
// needed.
func ContentEqual(a, b *State) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.Outputs) != len(b.Outputs) || !checkResultsEqual(a.CheckResults, b.CheckResults) {
		return false
	}
	for k, oa := range a.Outputs {
		ob, ok := b.Outputs[k]
		if !ok || (oa == nil) != (ob == nil) {
			return false
		}
		if oa != nil && (oa.Sensitive != ob.Sensitive || oa.Hash != ob.Hash || !rawEqual(oa.Value, ob.Value) || !rawEqual(oa.Type, ob.Type)) {
			return false
		}
	}
	if len(a.Resources) != len(b.Resources) {
		return false
	}
	byAddr := make(map[Address]*Resource, len(b.Resources))
	for _, r := range b.Resources {
		if r != nil {
			byAddr[r.Addr()] = r
		}
	}
	for _, ra := range a.Resources {
		if ra == nil {
			return false
		}
		rb := byAddr[ra.Addr()]
		if rb == nil || !resourceEqual(ra, rb) {
			return false
		}
		delete(byAddr, ra.Addr())
	}
	return len(byAddr) == 0
}

func resourceEqual(a, b *Resource) bool {
	if a.Provider != b.Provider || len(a.Instances) != len(b.Instances) {
		return false
	}
	for _, ia := range a.Instances {
		ib := b.instance(ia.IndexKey)
		if ia == nil || ib == nil {
			return false
		}
		if ia.SchemaVersion != ib.SchemaVersion || ia.Status != ib.Status ||
			ia.CreateBeforeDestroy != ib.CreateBeforeDestroy ||
			!slices.Equal(sortedUnique(ia.Dependencies), sortedUnique(ib.Dependencies)) ||
			!slices.Equal(sortedUnique(ia.SensitiveAttributes), sortedUnique(ib.SensitiveAttributes)) ||
			!maps.Equal(ia.SensitiveValues, ib.SensitiveValues) ||
			!rawEqual(ia.Attributes, ib.Attributes) {
			return false
		}
	}
	return true
}

func rawEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	isNull := func(r json.RawMessage) bool { return len(r) == 0 || string(bytes.TrimSpace(r)) == "null" }
	if isNull(a) && isNull(b) {
		return true
	}
	return bytes.Equal(compactRaw(a), compactRaw(b))
}

// PrepareWrite applies the serial rule before next is written over stored
// (nil when nothing is stored yet) and reports whether a write is needed.
// When both have the same lineage and the same content, nothing needs
// writing and next.Serial is set to the stored serial. When the content
// changed, next.Serial becomes at least the stored serial plus one. A next of
// a different lineage (a forced push) is written as it is. The history
// record AppendHistory added for this write gets the serial decided.
func PrepareWrite(stored, next *State) bool {
	if next.FormatVersion == 0 {
		next.FormatVersion = FormatVersion
	}
	defer next.stampHistory()
	if stored == nil {
		next.Serial = max(next.Serial, 1)
		return true
	}
	if stored.Lineage != next.Lineage {
		return true
	}
	if ContentEqual(stored, next) && stored.Serial >= next.Serial {
		next.Serial = stored.Serial
		return false
	}
	next.Serial = max(next.Serial, stored.Serial+1)
	return true
}

// CheckPush decides whether incoming may replace current, as `pondctl state
// push` does: a document of another lineage or with a lower serial is
// refused unless force is set. A document in a newer format is always
// refused. current may be nil when nothing is stored.
func CheckPush(current, incoming *State, force bool) error {
	if incoming == nil {
		return errors.New("cannot push: no state given")
	}
	if incoming.FormatVersion > FormatVersion {
		return fmt.Errorf("cannot push: state was written by a newer pond (format %d); this pond reads format %d: %w", incoming.FormatVersion, FormatVersion, ErrNewerFormat)
	}
	if newerRelease(incoming.PondVersion, PondVersion) {
		return fmt.Errorf("cannot push: %w", newerPondError(incoming.PondVersion))
	}
	if current == nil || force {
		return nil
	}
	if incoming.Lineage != current.Lineage {
		return fmt.Errorf("cannot push: the given state has lineage %s but the stored state has lineage %s, so they are unrelated states; use -force to overwrite", incoming.Lineage, current.Lineage)
	}
	if incoming.Serial < current.Serial {
		return fmt.Errorf("cannot push: the given state has serial %d, older than the stored state's serial %d; use -force to overwrite", incoming.Serial, current.Serial)
	}
	return nil
}
