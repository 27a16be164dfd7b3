package state

import (
	"fmt"
	"slices"
)

// Addr returns the address of the resource.
func (r *Resource) Addr() Address {
	return Address{Mode: r.Mode, Type: r.Type, Name: r.Name}
}

// InstanceAddr returns the address of r's instance with the given key.
func (r *Resource) InstanceAddr(key any) Address {
	a := r.Addr()
	a.Key = normalizeKey(key)
	return a
}

// Instance returns r's instance with the given key, or nil.
func (r *Resource) Instance(key any) *Instance {
	return r.instance(key)
}

func (r *Resource) instance(key any) *Instance {
	for _, inst := range r.Instances {
		if inst != nil && compareKeys(inst.IndexKey, key) == 0 {
			return inst
		}
	}
	return nil
}

func (r *Resource) instanceIndex(key any) int {
	for i, inst := range r.Instances {
		if inst != nil && compareKeys(inst.IndexKey, key) == 0 {
			return i
		}
	}
	return -1
}

func sameResource(r *Resource, a Address) bool {
	return r != nil && r.Name == a.Name && r.Type == a.Type && r.Mode == a.mode()
}

// Resource returns the resource at addr (its key, if any, is ignored), or
// nil. It scans the resources: for many lookups build an Index.
func (s *State) Resource(addr Address) *Resource {
	if i := s.resourceIndex(addr); i >= 0 {
		return s.Resources[i]
	}
	return nil
}

func (s *State) resourceIndex(addr Address) int {
	for i, r := range s.Resources {
		if sameResource(r, addr) {
			return i
		}
	}
	return -1
}

// Instance returns the instance at addr, or nil. An address without a key
// names the unkeyed instance.
func (s *State) Instance(addr Address) *Instance {
	r := s.Resource(addr)
	if r == nil {
		return nil
	}
	return r.instance(addr.Key)
}

// SetInstance stores inst at addr, replacing any instance already there and
// creating the resource (with the given provider) when needed. A non-empty
// provider also updates an existing resource's provider. inst.IndexKey is
// set from addr.Key.
func (s *State) SetInstance(addr Address, provider string, inst *Instance) {
	inst.IndexKey = normalizeKey(addr.Key)
	r := s.Resource(addr)
	if r == nil {
		r = &Resource{Mode: addr.mode(), Type: addr.Type, Name: addr.Name, Provider: provider}
		s.Resources = append(s.Resources, r)
	}
	if provider != "" {
		r.Provider = provider
	}
	if i := r.instanceIndex(addr.Key); i >= 0 {
		r.Instances[i] = inst
		return
	}
	r.Instances = append(r.Instances, inst)
}

// RemoveInstance removes the instance at addr, and its resource when no
// instance is left. It reports whether there was such an instance.
func (s *State) RemoveInstance(addr Address) bool {
	ri := s.resourceIndex(addr)
	if ri < 0 {
		return false
	}
	r := s.Resources[ri]
	i := r.instanceIndex(addr.Key)
	if i < 0 {
		return false
	}
	r.Instances = slices.Delete(r.Instances, i, i+1)
	if len(r.Instances) == 0 {
		s.Resources = slices.Delete(s.Resources, ri, ri+1)
	}
	return true
}

// Addresses returns the address of every instance in the state, sorted as
// `pondctl state list` prints them: data resources first, then by type, name
// and key (count keys numerically).
func (s *State) Addresses() []Address {
	var out []Address
	for _, r := range s.Resources {
		if r == nil {
			continue
		}
		for _, inst := range r.Instances {
			if inst != nil {
				out = append(out, r.InstanceAddr(inst.IndexKey))
			}
		}
	}
	slices.SortFunc(out, CompareAddresses)
	return out
}

// Filter returns the sorted instance addresses matched by any of the given
// addresses, as `terraform state list ADDR...` matches: an address without a
// key matches every instance of that resource, an address with a key matches
// that instance only. No addresses match everything.
func (s *State) Filter(addrs []Address) []Address {
	all := s.Addresses()
	if len(addrs) == 0 {
		return all
	}
	var out []Address
	for _, a := range all {
		for _, f := range addrs {
			if matches(f, a) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

func matches(filter, inst Address) bool {
	if filter.ResourceAddress() != inst.ResourceAddress() {
		return false
	}
	return filter.Key == nil || compareKeys(filter.Key, inst.Key) == 0
}

// Move moves state from src to dst, as `pondctl state mv` does. Between two
// addresses without keys it moves the whole resource, all its instances; when
// either has a key it moves one instance (an unkeyed source names the
// resource's single unkeyed instance, an unkeyed destination the unkeyed
// instance of the destination resource). The mode and type cannot change and
// an existing destination is never overwritten. Dependencies recorded on
// other instances follow a resource that moves as a whole.
func (s *State) Move(src, dst Address) error {
	src.Mode, dst.Mode = src.mode(), dst.mode()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("cannot move %s to %s: %s", src, dst, fmt.Sprintf(format, args...))
	}
	var err error
	if src.Key, err = validKey(src.Key); err != nil {
		return fail("%v", err)
	}
	if dst.Key, err = validKey(dst.Key); err != nil {
		return fail("%v", err)
	}
	if src == dst {
		return fail("source and destination are the same")
	}
	if src.Mode != dst.Mode {
		return fail("a %s resource cannot become a %s resource", src.Mode, dst.Mode)
	}
	if src.Type != dst.Type {
		return fail("the resource type cannot change (%s to %s)", src.Type, dst.Type)
	}
	sri := s.resourceIndex(src)
	if sri < 0 {
		return fail("no resource %s in the state", src.ResourceAddress())
	}
	sr := s.Resources[sri]
	dr := s.Resource(dst)

	if src.Key == nil && dst.Key == nil {
		if dr != nil {
			return fail("%s already exists in the state", dst)
		}
		sr.Type, sr.Name = dst.Type, dst.Name
		s.renameDependency(src.ResourceAddress().String(), dst.ResourceAddress().String())
		return nil
	}

	ii := sr.instanceIndex(src.Key)
	if ii < 0 {
		if src.Key == nil {
			return fail("%s has no unkeyed instance (it has %d keyed ones): give one instance, such as %s", src, len(sr.Instances), sr.InstanceAddr(firstKey(sr)))
		}
		return fail("no instance %s in the state", src)
	}
	if dr != nil {
		if dr.instance(dst.Key) != nil {
			return fail("%s already exists in the state", dst)
		}
		for _, other := range dr.Instances {
			if other == nil || other == sr.Instances[ii] {
				continue
			}
			if kindOf(other.IndexKey) != kindOf(dst.Key) {
				return fail("%s has %s instances, and a resource cannot also have %s ones", dst.ResourceAddress(), kindOf(other.IndexKey), kindOf(dst.Key))
			}
		}
	}
	inst := sr.Instances[ii]
	sr.Instances = slices.Delete(sr.Instances, ii, ii+1)
	srcGone := len(sr.Instances) == 0 && dr != sr
	if srcGone {
		s.Resources = slices.Delete(s.Resources, sri, sri+1)
	}
	if dr == nil {
		dr = &Resource{Mode: dst.Mode, Type: dst.Type, Name: dst.Name, Provider: sr.Provider}
		s.Resources = append(s.Resources, dr)
	}
	inst.IndexKey = dst.Key
	dr.Instances = append(dr.Instances, inst)
	if srcGone && src.ResourceAddress() != dst.ResourceAddress() {
		s.renameDependency(src.ResourceAddress().String(), dst.ResourceAddress().String())
	}
	return nil
}

// firstKey returns the smallest instance key of r.
func firstKey(r *Resource) any {
	var first any
	for i, inst := range r.Instances {
		if inst != nil && (i == 0 || compareKeys(inst.IndexKey, first) < 0) {
			first = inst.IndexKey
		}
	}
	return first
}

// RenameDependency rewrites the dependencies on the resource address from
// recorded on every instance to to, as when a resource is renamed.
func (s *State) RenameDependency(from, to string) { s.renameDependency(from, to) }

// renameDependency rewrites recorded dependencies on from to to.
func (s *State) renameDependency(from, to string) {
	for _, r := range s.Resources {
		if r == nil {
			continue
		}
		for _, inst := range r.Instances {
			if inst == nil {
				continue
			}
			changed := false
			for i, d := range inst.Dependencies {
				if d == from {
					inst.Dependencies[i] = to
					changed = true
				}
			}
			if changed {
				inst.Dependencies = sortedUnique(inst.Dependencies)
			}
		}
	}
}

// Remove removes what addr names, as `pondctl state rm` does: a whole
// resource when addr has no key, else one instance. It returns the removed
// instance addresses, or an error when nothing matches.
func (s *State) Remove(addr Address) ([]Address, error) {
	var err error
	if addr.Key, err = validKey(addr.Key); err != nil {
		return nil, fmt.Errorf("cannot remove %s: %w", addr, err)
	}
	ri := s.resourceIndex(addr)
	if ri < 0 {
		return nil, fmt.Errorf("cannot remove %s: no such resource in the state", addr)
	}
	r := s.Resources[ri]
	if addr.Key == nil {
		var removed []Address
		for _, inst := range r.Instances {
			if inst != nil {
				removed = append(removed, r.InstanceAddr(inst.IndexKey))
			}
		}
		s.Resources = slices.Delete(s.Resources, ri, ri+1)
		slices.SortFunc(removed, CompareAddresses)
		return removed, nil
	}
	if !s.RemoveInstance(addr) {
		return nil, fmt.Errorf("cannot remove %s: no such instance in the state", addr)
	}
	return []Address{addr}, nil
}

// Index gives constant-time lookups into a state. It is a snapshot: build a
// new one after the state's resources are added, removed or moved.
type Index struct {
	resources map[Address]*Resource
	instances map[Address]*Instance
}

// NewIndex indexes s's resources and instances by address.
func NewIndex(s *State) *Index {
	x := &Index{
		resources: make(map[Address]*Resource, len(s.Resources)),
		instances: make(map[Address]*Instance, len(s.Resources)),
	}
	for _, r := range s.Resources {
		if r == nil {
			continue
		}
		x.resources[r.Addr().ResourceAddress()] = r
		for _, inst := range r.Instances {
			if inst == nil {
				continue
			}
			if _, err := validKey(inst.IndexKey); err == nil {
				x.instances[r.InstanceAddr(inst.IndexKey).withMode()] = inst
			}
		}
	}
	return x
}

func (a Address) withMode() Address {
	a.Mode = a.mode()
	return a
}

// Resource returns the resource at addr (its key ignored), or nil.
func (x *Index) Resource(addr Address) *Resource {
	return x.resources[addr.ResourceAddress()]
}

// Instance returns the instance at addr, or nil.
func (x *Index) Instance(addr Address) *Instance {
	addr.Key = normalizeKey(addr.Key)
	if _, err := validKey(addr.Key); err != nil {
		return nil
	}
	return x.instances[addr.withMode()]
}
