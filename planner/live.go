package planner

import (
	"sync"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// liveState is a state document being changed by a plan or an apply, with
// an index by resource address so that each change costs constant time.
type liveState struct {
	mu  sync.Mutex
	s   *state.State
	res map[state.Address]*state.Resource
	// key gives the key of the hashes of sensitive values.
	key func() ([]byte, error)
}

func newLiveState(s *state.State, key func() ([]byte, error)) *liveState {
	l := &liveState{s: s, res: make(map[state.Address]*state.Resource, len(s.Resources)), key: key}
	for _, r := range s.Resources {
		l.res[r.Addr().ResourceAddress()] = r
	}
	return l
}

func (l *liveState) resource(ra state.Address) *state.Resource {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.res[ra.ResourceAddress()]
}

// instances returns the resource at ra and its instances by key string
// (state.KeyString).
func (l *liveState) instances(ra state.Address) (*state.Resource, map[string]*state.Instance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.res[ra.ResourceAddress()]
	if r == nil {
		return nil, nil
	}
	m := make(map[string]*state.Instance, len(r.Instances))
	for _, inst := range r.Instances {
		m[state.KeyString(inst.IndexKey)] = inst
	}
	return r, m
}

// set records an instance's value. The values of v marked sensitive are
// stored as null, with their keyed hash in the instance's SensitiveValues;
// the hash the instance had for a path that is null in v is kept.
func (l *liveState) set(ra state.Address, provKey string, key any, v cty.Value, schema *providers.Schema, deps []string, cbd bool) error {
	ks := state.KeyString(key)
	var keep map[string]string
	l.mu.Lock()
	if res := l.res[ra.ResourceAddress()]; res != nil {
		for _, old := range res.Instances {
			if state.KeyString(old.IndexKey) == ks {
				keep = old.SensitiveValues
			}
		}
	}
	l.mu.Unlock()
	v, sens := unmarkSensitive(v)
	sens = uniquePaths(append(sens, hashedPaths(v, keep)...))
	v, hashes, err := redact(v, sens, keep, l.key)
	if err != nil {
		return err
	}
	raw, err := encodeAttrs(v, schema)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	res := l.res[ra.ResourceAddress()]
	if res == nil {
		res = &state.Resource{Mode: ra.Mode, Type: ra.Type, Name: ra.Name}
		l.s.Resources = append(l.s.Resources, res)
		l.res[ra.ResourceAddress()] = res
	}
	res.Provider = "provider." + provKey
	inst := &state.Instance{IndexKey: key, SchemaVersion: schema.Version, Attributes: raw, SensitiveAttributes: sensitiveAttrs(schema), SensitiveValues: hashes, Dependencies: deps, CreateBeforeDestroy: cbd}
	for i, old := range res.Instances {
		if state.KeyString(old.IndexKey) == ks {
			res.Instances[i] = inst
			return nil
		}
	}
	res.Instances = append(res.Instances, inst)
	return nil
}

// remove deletes an instance, and its resource when no instance is left.
func (l *liveState) remove(ra state.Address, key any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.res[ra.ResourceAddress()]
	if r == nil {
		return
	}
	ks := state.KeyString(key)
	kept := r.Instances[:0]
	for _, inst := range r.Instances {
		if state.KeyString(inst.IndexKey) != ks {
			kept = append(kept, inst)
		}
	}
	r.Instances = kept
	if len(kept) > 0 {
		return
	}
	delete(l.res, ra.ResourceAddress())
	for i, x := range l.s.Resources {
		if x == r {
			l.s.Resources = append(l.s.Resources[:i], l.s.Resources[i+1:]...)
			break
		}
	}
}

// markTainted marks an instance as tainted, to be replaced by the next apply.
func (l *liveState) markTainted(ra state.Address, key any) {
	_, insts := l.instances(ra)
	l.mu.Lock()
	defer l.mu.Unlock()
	if inst := insts[state.KeyString(key)]; inst != nil {
		inst.Status = "tainted"
	}
}
