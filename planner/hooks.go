package planner

import (
	"time"

	"github.com/pond-htc/pond/state"
)

// Hooks receive progress events. Methods may be called concurrently.
type Hooks interface {
	PreRefresh(addr state.Address)
	PostRefresh(addr state.Address, err error)
	PreApply(addr state.Address, action Action)
	Progress(addr state.Address, action Action, msg string)
	PostApply(addr state.Address, action Action, id string, elapsed time.Duration, err error)
}

// NopHooks ignores every event.
type NopHooks struct{}

// PreRefresh implements Hooks.
func (NopHooks) PreRefresh(state.Address) {}

// PostRefresh implements Hooks.
func (NopHooks) PostRefresh(state.Address, error) {}

// PreApply implements Hooks.
func (NopHooks) PreApply(state.Address, Action) {}

// Progress implements Hooks.
func (NopHooks) Progress(state.Address, Action, string) {}

// PostApply implements Hooks.
func (NopHooks) PostApply(state.Address, Action, string, time.Duration, error) {}
