package planner

import (
	"crypto/rand"
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/planner/marks"
	"github.com/pond-htc/pond/providers"
)

// Sensitive values. A sensitive variable's value is marked
// (marks.Sensitive) when the engine is made, and HCL carries the mark
// through every expression and function, so a resource's configuration
// knows which of its values came from a secret. Providers get values
// without marks and, in their requests, the paths of the sensitive ones;
// plans keep the paths beside the values (ResourceChange.SensitivePaths) so
// that output shows (sensitive value) there; and the state keeps, instead
// of each such value, null and a keyed hash (state.Instance.SensitiveValues)
// with which the next plan tells whether the value changed.

// unmarkSensitive returns v without marks and the paths of its sensitive
// parts. A path that goes into a set stops at the set, whose elements have
// no path but themselves.
func unmarkSensitive(v cty.Value) (cty.Value, []cty.Path) {
	uv, pvm := v.UnmarkDeepWithPaths()
	var paths []cty.Path
	for _, pm := range pvm {
		if _, ok := pm.Marks[marks.Sensitive]; !ok {
			continue
		}
		p := stopAtSets(uv, pm.Path)
		if len(p) == 0 && uv.Type().IsObjectType() && uv.IsKnown() && !uv.IsNull() {
			// A whole object: each of its attributes, since the state
			// keeps the object itself.
			for name := range uv.Type().AttributeTypes() {
				paths = append(paths, cty.GetAttrPath(name))
			}
			continue
		}
		paths = append(paths, p)
	}
	return uv, uniquePaths(paths)
}

// stopAtSets cuts p at the first set it goes into.
func stopAtSets(v cty.Value, p cty.Path) cty.Path {
	cur := v
	for i, s := range p {
		if cur.IsNull() || !cur.IsKnown() {
			return p[:i:i]
		}
		if cur.Type().IsSetType() {
			return p[:i:i]
		}
		next, err := s.Apply(cur)
		if err != nil {
			return p[:i:i]
		}
		cur = next
	}
	return p
}

// uniquePaths sorts paths by their text and drops repeats and paths inside
// another of the list.
func uniquePaths(paths []cty.Path) []cty.Path {
	if len(paths) < 2 {
		return paths
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) < len(paths[j]) })
	var out []cty.Path
	for _, p := range paths {
		inside := false
		for _, q := range out {
			if len(q) <= len(p) && q.Equals(p[:len(q)]) {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return providers.FormatPath(out[i]) < providers.FormatPath(out[j]) })
	return out
}

// markSensitive marks the values of v at paths sensitive.
func markSensitive(v cty.Value, paths []cty.Path) cty.Value {
	if len(paths) == 0 || v == cty.NilVal {
		return v
	}
	pvm := make([]cty.PathValueMarks, len(paths))
	for i, p := range paths {
		pvm[i] = cty.PathValueMarks{Path: p, Marks: cty.NewValueMarks(marks.Sensitive)}
	}
	return v.MarkWithPaths(pvm)
}

// hashedPaths returns the paths of v that a state instance's
// SensitiveValues name.
func hashedPaths(v cty.Value, hashes map[string]string) []cty.Path {
	if len(hashes) == 0 {
		return nil
	}
	var out []cty.Path
	_ = cty.Walk(v, func(p cty.Path, _ cty.Value) (bool, error) {
		if _, ok := hashes[providers.FormatPath(p)]; ok && len(p) > 0 {
			out = append(out, p.Copy())
			return false, nil
		}
		return true, nil
	})
	return out
}

// redact returns v with the values at paths replaced by null, and the
// keyed hash of each, by path text. A path v does not have, or where v is
// null or not yet known, is left out. keep holds hashes to keep for paths
// that are null in v (the state's, when the provider did not echo the
// value back).
func redact(v cty.Value, paths []cty.Path, keep map[string]string, key func() ([]byte, error)) (cty.Value, map[string]string, error) {
	hashes := map[string]string{}
	null := map[string]bool{}
	for _, p := range paths {
		s := providers.FormatPath(p)
		leaf, err := p.Apply(v)
		if err != nil {
			continue
		}
		null[s] = true
		if leaf.IsNull() {
			if h, ok := keep[s]; ok {
				hashes[s] = h
			}
			continue
		}
		if !leaf.IsWhollyKnown() {
			continue
		}
		k, err := key()
		if err != nil {
			return cty.NilVal, nil, err
		}
		h, err := providers.Hash(k, s, leaf)
		if err != nil {
			return cty.NilVal, nil, fmt.Errorf("%s: %w", s, err)
		}
		hashes[s] = h
	}
	if len(null) == 0 {
		return v, nil, nil
	}
	out, err := cty.Transform(v, func(p cty.Path, x cty.Value) (cty.Value, error) {
		if len(p) > 0 && null[providers.FormatPath(p)] {
			return cty.NullVal(x.Type()), nil
		}
		return x, nil
	})
	if err != nil {
		return cty.NilVal, nil, err
	}
	if len(hashes) == 0 {
		hashes = nil
	}
	return out, hashes, nil
}

// restore returns prior, read from a state instance whose sensitive values
// hashes holds, with each of those values taken from src (the
// configuration) where src's value at that path has the same hash: the
// secret did not change. Where it changed, prior keeps null, so that the
// plan shows the change.
func restore(prior cty.Value, hashes map[string]string, src cty.Value, key func() ([]byte, error)) (cty.Value, error) {
	if len(hashes) == 0 || prior.IsNull() || src.IsNull() {
		return prior, nil
	}
	found := map[string]cty.Value{}
	var werr error
	_ = cty.Walk(src, func(p cty.Path, x cty.Value) (bool, error) {
		s := providers.FormatPath(p)
		want, ok := hashes[s]
		if !ok || len(p) == 0 {
			return true, nil
		}
		if x.IsNull() || !x.IsWhollyKnown() {
			return false, nil
		}
		k, err := key()
		if err != nil {
			werr = err
			return false, err
		}
		if h, err := providers.Hash(k, s, x); err == nil && h == want {
			found[s] = x
		}
		return false, nil
	})
	if werr != nil {
		return cty.NilVal, werr
	}
	if len(found) == 0 {
		return prior, nil
	}
	return cty.Transform(prior, func(p cty.Path, x cty.Value) (cty.Value, error) {
		if len(p) == 0 {
			return x, nil
		}
		if v, ok := found[providers.FormatPath(p)]; ok && x.IsNull() {
			return v, nil
		}
		return x, nil
	})
}

// hashKey returns the key of the hashes of sensitive values: the one
// Options.HashKey gives, or, without it, a key of this engine alone (the
// state's hashes then never match, and sensitive values show as changed).
func (e *Engine) hashKey() ([]byte, error) {
	e.keyOnce.Do(func() {
		if e.opts.HashKey != nil {
			e.key, e.keyErr = e.opts.HashKey()
			return
		}
		e.key = make([]byte, 32)
		_, e.keyErr = rand.Read(e.key)
	})
	return e.key, e.keyErr
}

// unmarkForProvider returns v without marks, for a call to a provider that
// takes no sensitive paths (a provider block, a data source). It is the
// place where a secret leaves the planner's care; providers are told not
// to log what they get.
func unmarkForProvider(v cty.Value) cty.Value {
	uv, _ := v.UnmarkDeep()
	return uv
}

// sensitiveDiag is the error of a sensitive value used where its value
// would be shown: an instance key, an output not declared sensitive.
func sensitiveDiag(summary, detail string, subject *hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: subject}
}

// MarkStored returns v, the value of a state instance whose
// SensitiveValues are hashes, with the values at the paths hashes names
// marked sensitive, so that they show as (sensitive value).
func MarkStored(v cty.Value, hashes map[string]string) cty.Value {
	return markSensitive(v, hashedPaths(v, hashes))
}
