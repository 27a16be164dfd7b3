package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/internal/jsonhttp"
)

// routes serves the agent's API (the routes of overlay/api) on its mux.
// The daemons' routes under wire.PathPrefix are added by startDaemons.
func (a *Agent) routes() {
	m := a.mux
	m.HandleFunc("GET "+api.PathHealth, func(w http.ResponseWriter, r *http.Request) {
		jsonhttp.Write(w, http.StatusOK, api.Health{Status: "ok", Name: a.cfg.Name, Members: len(a.sea.Members())})
	})
	m.HandleFunc("GET "+api.PathSelf, func(w http.ResponseWriter, r *http.Request) {
		jsonhttp.Write(w, http.StatusOK, a.Self())
	})
	m.HandleFunc("GET "+api.PathMembers, a.handleMembers)
	m.HandleFunc("POST "+api.PathLeave, func(w http.ResponseWriter, r *http.Request) {
		jsonhttp.Write(w, http.StatusOK, map[string]string{"status": "leaving"})
		a.Leave()
	})
	m.HandleFunc("PUT "+api.PathTags, a.handleTags)
	m.HandleFunc("GET "+api.PathKeys, func(w http.ResponseWriter, r *http.Request) {
		res, err := a.sea.ListKeys()
		writeKeyResult(w, res, err)
	})
	for op, fn := range map[string]func(string) (*gossip.KeyResult, error){
		"install": a.sea.InstallKey,
		"use":     a.sea.UseKey,
		"remove":  a.sea.RemoveKey,
	} {
		m.HandleFunc("POST "+api.PathKeys+"/"+op, func(w http.ResponseWriter, r *http.Request) {
			var req api.KeyRequest
			if err := jsonhttp.Decode(r, &req); err != nil || req.Key == "" {
				jsonhttp.Error(w, http.StatusBadRequest, `body: want {"key": "BASE64"}`)
				return
			}
			res, err := fn(req.Key)
			writeKeyResult(w, res, err)
		})
	}
	m.HandleFunc("POST "+api.PathQuery, a.handleQuery)
	m.HandleFunc("POST "+api.PathMatch, a.handleMatch)
	pond := a.members.Handler()
	m.Handle(api.PathPond, pond)
	m.Handle(api.PathPond+"/", pond)
	if a.policy != nil {
		m.HandleFunc("GET "+api.PathPolicy, func(w http.ResponseWriter, r *http.Request) {
			jsonhttp.Write(w, http.StatusOK, a.policy.Status())
		})
	}
	if a.cfg.EnableDebug {
		m.HandleFunc("/debug/pprof/", pprof.Index)
		m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		m.HandleFunc("/debug/pprof/profile", pprof.Profile)
		m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
}

// handleTags sets serf tags. A new cm tag moves the daemons too, as a pond
// invitation does.
func (a *Agent) handleTags(w http.ResponseWriter, r *http.Request) {
	var tags map[string]string
	if err := jsonhttp.Decode(r, &tags); err != nil {
		jsonhttp.Error(w, http.StatusBadRequest, fmt.Sprintf("body: %v", err))
		return
	}
	var err error
	if cm, ok := tags[gossip.TagCM]; ok {
		delete(tags, gossip.TagCM)
		err = a.SetCondorHost(cm, tags)
	} else {
		err = a.SetTags(tags)
	}
	if err != nil {
		jsonhttp.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	jsonhttp.Write(w, http.StatusOK, a.sea.LocalMember().Tags)
}

func writeKeyResult(w http.ResponseWriter, res *gossip.KeyResult, err error) {
	switch {
	case err != nil && res == nil:
		jsonhttp.Error(w, http.StatusBadRequest, err.Error())
	case err != nil:
		jsonhttp.Write(w, http.StatusInternalServerError, struct {
			api.Error
			*gossip.KeyResult
		}{api.Error{Error: err.Error()}, res})
	default:
		jsonhttp.Write(w, http.StatusOK, res)
	}
}

func (a *Agent) handleMembers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	filters := map[string]string{}
	for _, t := range q["tag"] {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			jsonhttp.Error(w, http.StatusBadRequest, fmt.Sprintf("tag filter %q: want KEY=VALUE", t))
			return
		}
		filters[k] = v
	}
	out := []api.Member{}
next:
	for _, m := range a.sea.Members() {
		if status != "" && m.Status != status {
			continue
		}
		for k, v := range filters {
			if got, ok := m.Tags[k]; !ok || got != v {
				continue next
			}
		}
		out = append(out, m)
	}
	jsonhttp.Write(w, http.StatusOK, out)
}

// handleQuery runs a tree query with the agent as root. A zero deadline
// means api.DefaultQueryTimeout from now.
func (a *Agent) handleQuery(w http.ResponseWriter, r *http.Request) {
	var q api.Query
	if err := jsonhttp.Decode(r, &q); err != nil {
		jsonhttp.Error(w, http.StatusBadRequest, "invalid query: "+err.Error())
		return
	}
	if err := api.ValidateQuery(&q); err != nil {
		jsonhttp.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	if q.Deadline.IsZero() {
		q.Deadline = time.Now().Add(api.DefaultQueryTimeout)
	}
	ctx, cancel := context.WithDeadline(r.Context(), q.Deadline.Add(time.Second))
	defer cancel()
	ans, err := a.tree.Query(ctx, q)
	if err != nil {
		jsonhttp.Error(w, http.StatusBadGateway, err.Error())
		return
	}
	jsonhttp.Write(w, http.StatusOK, ans)
}

func (a *Agent) handleMatch(w http.ResponseWriter, r *http.Request) {
	var req api.MatchRequest
	if err := jsonhttp.Decode(r, &req); err != nil {
		jsonhttp.Error(w, http.StatusBadRequest, fmt.Sprintf("body: %v", err))
		return
	}
	if req.Timeout < 0 {
		jsonhttp.Error(w, http.StatusBadRequest, "timeout: must not be negative")
		return
	}
	if err := api.ValidateQuery(&api.Query{Requirements: req.Requirements, Rank: req.Rank}); err != nil {
		jsonhttp.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	ans, err := a.Match(r.Context(), req)
	if err != nil {
		jsonhttp.Error(w, http.StatusBadGateway, err.Error())
		return
	}
	jsonhttp.Write(w, http.StatusOK, ans)
}
