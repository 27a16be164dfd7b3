package planner

import (
	"time"
)

// Hooks receive progress events. Methods may be called concurrently.
type Hooks interface {
	PreRefresh(addr InstanceAddr)
	PostRefresh(addr InstanceAddr, err error)
	PreApply(addr InstanceAddr, action Action)
	Progress(addr InstanceAddr, action Action, msg string)
	PostApply(addr InstanceAddr, action Action, id string, elapsed time.Duration, err error)
}

// NopHooks ignores every event.
type NopHooks struct{}

// PreRefresh implements Hooks.
func (NopHooks) PreRefresh(InstanceAddr) {}

// PostRefresh implements Hooks.
func (NopHooks) PostRefresh(InstanceAddr, error) {}

// PreApply implements Hooks.
func (NopHooks) PreApply(InstanceAddr, Action) {}

// Progress implements Hooks.
func (NopHooks) Progress(InstanceAddr, Action, string) {}

// PostApply implements Hooks.
func (NopHooks) PostApply(InstanceAddr, Action, string, time.Duration, error) {}
