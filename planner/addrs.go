package planner

import (
	"fmt"
	"strconv"

	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/state"
)

// ResourceAddr names a resource block: pool.campus or data.sea_query.big.
type ResourceAddr struct {
	Mode config.Mode
	Type string
	Name string
}

// String formats the address as it is written in configuration.
func (r ResourceAddr) String() string {
	if r.Mode == config.DataResource {
		return "data." + r.Type + "." + r.Name
	}
	return r.Type + "." + r.Name
}

// StateMode is the mode string used in the state document.
func (r ResourceAddr) StateMode() string {
	if r.Mode == config.DataResource {
		return state.ModeData
	}
	return state.ModeManaged
}

// Instance returns the address of the instance with the given key.
func (r ResourceAddr) Instance(key any) InstanceAddr { return InstanceAddr{Resource: r, Key: key} }

// InstanceAddr names one instance of a resource. Key is nil, an int (count)
// or a string (for_each).
type InstanceAddr struct {
	Resource ResourceAddr
	Key      any
}

// String formats the address as Terraform does: pool.w[0], pool.w["a"].
func (a InstanceAddr) String() string {
	return a.Resource.String() + keyString(a.Key)
}

func keyString(k any) string {
	switch k := k.(type) {
	case nil:
		return ""
	case int:
		return "[" + strconv.Itoa(k) + "]"
	case string:
		return "[" + strconv.Quote(k) + "]"
	default:
		return fmt.Sprintf("[%v]", k)
	}
}

// normalizeKey converts keys decoded from JSON (float64) to ints.
func normalizeKey(k any) any {
	switch k := k.(type) {
	case float64:
		return int(k)
	case int64:
		return int(k)
	}
	return k
}

func stateResourceAddr(r *state.Resource) ResourceAddr {
	m := config.ManagedResource
	if r.Mode == state.ModeData {
		m = config.DataResource
	}
	return ResourceAddr{Mode: m, Type: r.Type, Name: r.Name}
}
