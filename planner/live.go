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
}

func newLiveState(s *state.State) *liveState {
	l := &liveState{s: s, res: make(map[state.Address]*state.Resource, len(s.Resources))}
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

// set records an instance's value.
func (l *liveState) set(ra state.Address, provKey string, key any, v cty.Value, schema *providers.Schema, deps []string, cbd bool) error {
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
	inst := &state.Instance{IndexKey: key, SchemaVersion: schema.Version, Attributes: raw, SensitiveAttributes: sensitiveAttrs(schema), Dependencies: deps, CreateBeforeDestroy: cbd}
	ks := state.KeyString(key)
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
