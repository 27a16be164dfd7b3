package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/cmd/internal/ui/jsonview"
	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/state"
)

// uiHooks prints apply and refresh progress as Terraform does, with the
// elapsed time of each resource and a reminder every interval while one
// runs. With a view, each event is a message of the machine-readable UI.
type uiHooks struct {
	w        io.Writer
	col      colorizer
	view     *jsonview.View
	interval time.Duration

	mu      sync.Mutex
	running map[string]chan struct{}
	started map[string]time.Time
}

// newUIHooks returns hooks printing text to w, or messages to view when
// it is not nil.
func newUIHooks(w io.Writer, col colorizer, view *jsonview.View) *uiHooks {
	return &uiHooks{w: w, col: col, view: view, interval: 10 * time.Second, running: map[string]chan struct{}{}, started: map[string]time.Time{}}
}

// emit prints one event: a message of type kind with hook h, or the text
// line "addr: msg".
func (h *uiHooks) emit(kind string, hook jsonview.Hook, msg string) {
	if h.view != nil {
		switch kind {
		case jsonview.TypeRefreshStart:
			h.view.RefreshStart(hook)
		case jsonview.TypeRefreshComplete:
			h.view.RefreshComplete(hook)
		case jsonview.TypeApplyStart:
			h.view.ApplyStart(hook, msg)
		case jsonview.TypeApplyProgress:
			h.view.ApplyProgress(hook, msg)
		case jsonview.TypeApplyComplete:
			h.view.ApplyComplete(hook, msg)
		case jsonview.TypeApplyErrored:
			h.view.ApplyErrored(hook, msg)
		}
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(h.w, "%s%s\n", h.col.bold(hook.Resource.Addr+":"), " "+msg)
}

// diagnostics prints each diagnostic as a message of type "diagnostic".
func (h *uiHooks) diagnostics(diags hcl.Diagnostics) {
	for _, d := range jsonDiagnostics(diags) {
		h.view.Diagnostic(d, nil)
	}
}

func ing(a planner.Action) (string, string) {
	switch a {
	case planner.Create, planner.DeleteThenCreate, planner.CreateThenDelete:
		return "Creating", "Creation"
	case planner.Update:
		return "Modifying", "Modifications"
	case planner.Delete:
		return "Destroying", "Destruction"
	case planner.Read:
		return "Reading", "Read"
	}
	return "Applying", "Apply"
}

// PreRefresh implements planner.Hooks.
func (h *uiHooks) PreRefresh(addr state.Address) {
	h.emit(jsonview.TypeRefreshStart, hookJSON(addr, planner.NoOp, 0, false), "Refreshing state...")
}

// PostRefresh implements planner.Hooks.
func (h *uiHooks) PostRefresh(addr state.Address, err error) {
	if err == nil && h.view != nil {
		h.emit(jsonview.TypeRefreshComplete, hookJSON(addr, planner.NoOp, 0, false), "Refresh complete")
	}
}

// PreApply implements planner.Hooks.
func (h *uiHooks) PreApply(addr state.Address, action planner.Action) {
	doing, _ := ing(action)
	h.emit(jsonview.TypeApplyStart, hookJSON(addr, action, 0, false), doing+"...")
	stop := make(chan struct{})
	key := addr.String() + action.String()
	h.mu.Lock()
	h.running[key] = stop
	h.started[key] = time.Now()
	h.mu.Unlock()
	go func() {
		t := time.NewTicker(h.interval)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				el := time.Since(start).Round(time.Second)
				h.emit(jsonview.TypeApplyProgress, hookJSON(addr, action, el, true), fmt.Sprintf("Still %s... [%s elapsed]", lowerFirst(doing), el))
			}
		}
	}()
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]+'a'-'A') + s[1:]
}

// Progress implements planner.Hooks.
func (h *uiHooks) Progress(addr state.Address, action planner.Action, msg string) {
	h.mu.Lock()
	start, ok := h.started[addr.String()+action.String()]
	h.mu.Unlock()
	el := ""
	hook := hookJSON(addr, action, 0, false)
	if ok {
		since := time.Since(start)
		el = fmt.Sprintf(" [%s elapsed]", since.Round(100*time.Millisecond))
		hook = hookJSON(addr, action, since, true)
	}
	hook.Message = msg
	h.emit(jsonview.TypeApplyProgress, hook, msg+el)
}

// PostApply implements planner.Hooks.
func (h *uiHooks) PostApply(addr state.Address, action planner.Action, id string, elapsed time.Duration, err error) {
	key := addr.String() + action.String()
	h.mu.Lock()
	if stop, ok := h.running[key]; ok {
		close(stop)
		delete(h.running, key)
		delete(h.started, key)
	}
	h.mu.Unlock()
	_, noun := ing(action)
	el := elapsed.Round(time.Second)
	if elapsed < time.Second {
		el = elapsed.Round(10 * time.Millisecond)
	}
	if err != nil {
		h.emit(jsonview.TypeApplyErrored, hookJSON(addr, action, elapsed, true), fmt.Sprintf("%s errored after %s", noun, el))
		return
	}
	msg := fmt.Sprintf("%s complete after %s", noun, el)
	if id != "" {
		msg += " [id=" + id + "]"
	}
	hook := hookJSON(addr, action, elapsed, true)
	if id != "" {
		hook.IDKey, hook.IDValue = "id", id
	}
	h.emit(jsonview.TypeApplyComplete, hook, msg)
}
