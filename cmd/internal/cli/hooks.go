package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/state"
)

// uiHooks prints apply and refresh progress as Terraform does, with the
// elapsed time of each resource and a reminder every interval while one
// runs. In JSON mode each event is one JSON object per line.
type uiHooks struct {
	w        io.Writer
	col      colorizer
	json     bool
	interval time.Duration

	mu      sync.Mutex
	running map[string]chan struct{}
	started map[string]time.Time
}

func newUIHooks(w io.Writer, col colorizer, jsonMode bool) *uiHooks {
	return &uiHooks{w: w, col: col, json: jsonMode, interval: 10 * time.Second, running: map[string]chan struct{}{}, started: map[string]time.Time{}}
}

func (h *uiHooks) emit(kind string, addr state.Address, action planner.Action, msg string, extra map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.json {
		ev := map[string]any{
			"@level":     "info",
			"@message":   addr.String() + ": " + msg,
			"@timestamp": time.Now().UTC().Format(time.RFC3339Nano),
			"type":       kind,
			"hook":       map[string]any{"resource": map[string]any{"addr": addr.String()}, "action": action.String()},
		}
		for k, v := range extra {
			ev["hook"].(map[string]any)[k] = v
		}
		b, _ := json.Marshal(ev)
		fmt.Fprintln(h.w, string(b))
		return
	}
	fmt.Fprintf(h.w, "%s%s\n", h.col.bold(addr.String()+":"), " "+msg)
}

// diagnostics prints each diagnostic as a JSON event of type "diagnostic",
// as Terraform's -json output does.
func (h *uiHooks) diagnostics(diags hcl.Diagnostics) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, jd := range config.DiagnosticsJSON(diags) {
		level, sev := "error", "Error"
		if diags[i].Severity == hcl.DiagWarning {
			level, sev = "warn", "Warning"
		}
		b, _ := json.Marshal(map[string]any{
			"@level":     level,
			"@message":   sev + ": " + jd.Summary,
			"@timestamp": time.Now().UTC().Format(time.RFC3339Nano),
			"type":       "diagnostic",
			"diagnostic": jd,
		})
		fmt.Fprintln(h.w, string(b))
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
	h.emit("refresh_start", addr, planner.NoOp, "Refreshing state...", nil)
}

// PostRefresh implements planner.Hooks.
func (h *uiHooks) PostRefresh(addr state.Address, err error) {
	if err != nil && h.json {
		h.emit("refresh_errored", addr, planner.NoOp, err.Error(), nil)
	}
}

// PreApply implements planner.Hooks.
func (h *uiHooks) PreApply(addr state.Address, action planner.Action) {
	doing, _ := ing(action)
	h.emit("apply_start", addr, action, doing+"...", nil)
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
				h.emit("apply_progress", addr, action, fmt.Sprintf("Still %s... [%s elapsed]", lowerFirst(doing), el), map[string]any{"elapsed_seconds": int(el.Seconds())})
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
	if ok {
		el = fmt.Sprintf(" [%s elapsed]", time.Since(start).Round(100*time.Millisecond))
	}
	h.emit("apply_progress", addr, action, msg+el, nil)
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
		h.emit("apply_errored", addr, action, fmt.Sprintf("%s errored after %s", noun, el), map[string]any{"elapsed_seconds": elapsed.Seconds()})
		return
	}
	msg := fmt.Sprintf("%s complete after %s", noun, el)
	if id != "" {
		msg += " [id=" + id + "]"
	}
	h.emit("apply_complete", addr, action, msg, map[string]any{"elapsed_seconds": elapsed.Seconds(), "id_value": id})
}
