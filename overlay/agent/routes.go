package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
)

// maxRequest bounds the body of a request to the agent's own routes.
const maxRequest = 1 << 20

// routes serves the agent's API (the routes of overlay/api) on its mux,
// each request body bounded by maxRequest. The daemons' routes under
// wire.PathPrefix are added by startDaemons.
func (a *Agent) routes() {
	mux := a.mux
	m := routeMux{mux}
	m.HandleFunc("GET "+api.PathHealth, func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, api.Health{Status: "ok", Name: a.cfg.Name, Members: len(a.sea.Members())})
	})
	m.HandleFunc("GET "+api.PathSelf, func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, a.Self())
	})
	m.HandleFunc("GET "+api.PathMembers, a.handleMembers)
	m.HandleFunc("POST "+api.PathLeave, func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, map[string]string{"status": "leaving"})
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
			if err := wire.ReadJSON(r, &req); err != nil || req.Key == "" {
				wire.WriteError(w, http.StatusBadRequest, errors.New(`body: want {"key": "BASE64"}`))
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
			wire.WriteJSON(w, http.StatusOK, a.policy.Status())
		})
	}
	if a.cfg.EnableDebug {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
}

// routeMux registers handlers with their request bodies bounded.
type routeMux struct{ mux *http.ServeMux }

func (m routeMux) Handle(pattern string, h http.Handler) {
	m.mux.Handle(pattern, wire.LimitBody(maxRequest, h))
}

func (m routeMux) HandleFunc(pattern string, h http.HandlerFunc) { m.Handle(pattern, h) }

// handleTags sets serf tags. A new cm tag moves the daemons too, as a pond
// invitation does.
func (a *Agent) handleTags(w http.ResponseWriter, r *http.Request) {
	var tags map[string]string
	if err := wire.ReadJSON(r, &tags); err != nil {
		wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("body: %v", err))
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
		wire.WriteError(w, http.StatusBadRequest, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, a.sea.LocalMember().Tags)
}

func writeKeyResult(w http.ResponseWriter, res *gossip.KeyResult, err error) {
	switch {
	case err != nil && res == nil:
		wire.WriteError(w, http.StatusBadRequest, err)
	case err != nil:
		wire.WriteJSON(w, http.StatusInternalServerError, struct {
			api.Error
			*gossip.KeyResult
		}{api.Error{Error: err.Error()}, res})
	default:
		wire.WriteJSON(w, http.StatusOK, res)
	}
}

func (a *Agent) handleMembers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	filters := map[string]string{}
	for _, t := range q["tag"] {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("tag filter %q: want KEY=VALUE", t))
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
	wire.WriteJSON(w, http.StatusOK, out)
}

// handleQuery runs a tree query with the agent as root. A zero deadline
// means api.DefaultQueryTimeout from now.
func (a *Agent) handleQuery(w http.ResponseWriter, r *http.Request) {
	var q api.Query
	if err := wire.ReadJSON(r, &q); err != nil {
		wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("invalid query: %w", err))
		return
	}
	if err := api.ValidateQuery(&q); err != nil {
		wire.WriteError(w, http.StatusBadRequest, err)
		return
	}
	if q.Deadline.IsZero() {
		q.Deadline = time.Now().Add(api.DefaultQueryTimeout)
	}
	ctx, cancel := context.WithDeadline(r.Context(), q.Deadline.Add(time.Second))
	defer cancel()
	ans, err := a.tree.Query(ctx, q)
	if err != nil {
		wire.WriteError(w, http.StatusBadGateway, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, ans)
}

func (a *Agent) handleMatch(w http.ResponseWriter, r *http.Request) {
	var req api.MatchRequest
	if err := wire.ReadJSON(r, &req); err != nil {
		wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("body: %v", err))
		return
	}
	if req.Timeout < 0 {
		wire.WriteError(w, http.StatusBadRequest, errors.New("timeout: must not be negative"))
		return
	}
	if err := api.ValidateQuery(&api.Query{Requirements: req.Requirements, Rank: req.Rank}); err != nil {
		wire.WriteError(w, http.StatusBadRequest, err)
		return
	}
	ans, err := a.Match(r.Context(), req)
	if err != nil {
		wire.WriteError(w, http.StatusBadGateway, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, ans)
}
