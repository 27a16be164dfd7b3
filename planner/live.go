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
	res map[ResourceAddr]*state.Resource
}

func newLiveState(s *state.State) *liveState {
	l := &liveState{s: s, res: make(map[ResourceAddr]*state.Resource, len(s.Resources))}
	for _, r := range s.Resources {
		l.res[stateResourceAddr(r)] = r
	}
	return l
}

func (l *liveState) resource(ra ResourceAddr) *state.Resource {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.res[ra]
}

// instances returns the resource at ra and its instances by key string.
func (l *liveState) instances(ra ResourceAddr) (*state.Resource, map[string]*state.Instance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.res[ra]
	if r == nil {
		return nil, nil
	}
	m := make(map[string]*state.Instance, len(r.Instances))
	for _, inst := range r.Instances {
		m[keyString(normalizeKey(inst.IndexKey))] = inst
	}
	return r, m
}

// set records an instance's value.
func (l *liveState) set(ra ResourceAddr, provKey string, key any, v cty.Value, schema *providers.Schema, deps []string, cbd bool) error {
	raw, err := encodeAttrs(v, schema)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	res := l.res[ra]
	if res == nil {
		res = &state.Resource{Mode: ra.StateMode(), Type: ra.Type, Name: ra.Name}
		l.s.Resources = append(l.s.Resources, res)
		l.res[ra] = res
	}
	res.Provider = "provider." + provKey
	inst := &state.Instance{IndexKey: key, SchemaVersion: schema.Version, Attributes: raw, SensitiveAttributes: sensitiveAttrs(schema), Dependencies: deps, CreateBeforeDestroy: cbd}
	ks := keyString(key)
	for i, old := range res.Instances {
		if keyString(normalizeKey(old.IndexKey)) == ks {
			res.Instances[i] = inst
			return nil
		}
	}
	res.Instances = append(res.Instances, inst)
	return nil
}

// remove deletes an instance, and its resource when no instance is left.
func (l *liveState) remove(ra ResourceAddr, key any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.res[ra]
	if r == nil {
		return
	}
	ks := keyString(key)
	kept := r.Instances[:0]
	for _, inst := range r.Instances {
		if keyString(normalizeKey(inst.IndexKey)) != ks {
			kept = append(kept, inst)
		}
	}
	r.Instances = kept
	if len(kept) > 0 {
		return
	}
	delete(l.res, ra)
	for i, x := range l.s.Resources {
		if x == r {
			l.s.Resources = append(l.s.Resources[:i], l.s.Resources[i+1:]...)
			break
		}
	}
}

// markTainted marks an instance as tainted, to be replaced by the next apply.
func (l *liveState) markTainted(ra ResourceAddr, key any) {
	_, insts := l.instances(ra)
	l.mu.Lock()
	defer l.mu.Unlock()
	if inst := insts[keyString(key)]; inst != nil {
		inst.Status = "tainted"
	}
}
