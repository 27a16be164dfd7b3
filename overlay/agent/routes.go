package agent

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/pprof"
	"slices"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/console"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/match"
	"github.com/pond-htc/pond/overlay/query"
)

// maxRequest bounds the body of a request to the agent's own routes.
const maxRequest = 1 << 20

// routes serves the agent's API (the routes of overlay/api) on its mux,
// each request body bounded by maxRequest and, when the agent trusts token
// keys (-trusted-keys), each route but the health check behind a token of
// the scope it needs: reading the sea, changing it (pond invitations and
// releases), or administering it (tags, gossip keys, leaving). The daemons'
// routes under wire.PathPrefix are added by startDaemons.
func (a *Agent) routes() {
	m := routeMux{mux: a.mux, verifier: a.verifier, table: map[string]api.Route{}, served: &a.served}
	for _, r := range api.Routes() {
		m.table[r.Pattern()] = r
	}
	m.handle("GET "+api.PathHealth, func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, api.Health{Status: "ok", Name: a.cfg.Name, Members: len(a.sea.Members())})
	})
	m.handle("GET "+api.PathSelf, func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, a.Self())
	})
	m.handle("GET "+api.PathMembers, gossip.MembersHandler(a.sea))
	m.handle("POST "+api.PathLeave, func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, map[string]string{"status": "leaving"})
		a.Leave()
	})
	m.handle("PUT "+api.PathTags, a.handleTags)
	keys := gossip.KeyRoutes(a.sea)
	for _, p := range slices.Sorted(maps.Keys(keys)) {
		m.handle(p, keys[p])
	}
	m.handle("POST "+api.PathQuery, query.Handler(a.tree.Query))
	m.handle("POST "+api.PathMatch, match.Handler(a.sea))
	pond := a.members.Handler().ServeHTTP
	m.handle("GET "+api.PathPond, pond)
	m.handle("POST "+api.PathInvite, pond)
	m.handle("POST "+api.PathRelease, pond)
	a.relayRoutes(m)
	a.factoryRoutes(m)
	a.failoverRoutes(m)
	a.flockRoutes(m)
	if a.policy != nil {
		m.handle("GET "+api.PathPolicy, func(w http.ResponseWriter, r *http.Request) {
			wire.WriteJSON(w, http.StatusOK, a.policy.Status())
		})
	}
	a.consoleRoutes()
	if a.cfg.EnableDebug {
		m.handle("GET "+api.PathDebug, pprof.Index)
		m.handle("GET "+api.PathDebug+"cmdline", pprof.Cmdline)
		m.handle("GET "+api.PathDebug+"profile", pprof.Profile)
		m.handle("GET "+api.PathDebug+"symbol", pprof.Symbol)
		m.handle("GET "+api.PathDebug+"trace", pprof.Trace)
	}
}

// consoleRoutes serves the web console under console.Prefix: its pages
// call the routes above with the viewer's token, behind the same verifier.
func (a *Agent) consoleRoutes() {
	c, err := console.New(console.Config{Verifier: a.verifier, APIAddr: a.APIAddr, TLS: a.clientTLS, Logger: a.logger})
	if err != nil {
		a.logger.Error("the web console cannot start", "err", err)
		return
	}
	c.Register(a.mux)
}

// routeMux registers the agent's routes: request bodies bounded, and each
// route behind the scope api.Routes gives it when there is a verifier.
type routeMux struct {
	mux      *http.ServeMux
	verifier *auth.Verifier // nil: the API is open
	table    map[string]api.Route
	served   *[]api.Route
}

// handle serves pattern, a route of api.Routes: a route missing from that
// table is a mistake of this package, caught by its tests.
func (m routeMux) handle(pattern string, h http.HandlerFunc) {
	r, ok := m.table[pattern]
	if !ok {
		panic("agent: route " + pattern + " is not in api.Routes")
	}
	*m.served = append(*m.served, r)
	var handler http.Handler = h
	if m.verifier != nil && r.Scope != "" {
		handler = auth.Require(m.verifier, r.Scope, handler)
	}
	m.mux.Handle(pattern, wire.LimitBody(maxRequest, handler))
}

// handleTags sets serf tags. A new cm tag moves the daemons too, as a pond
// invitation does.
func (a *Agent) handleTags(w http.ResponseWriter, r *http.Request) {
	var tags map[string]string
	if err := wire.ReadJSON(r, &tags); err != nil {
		wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("body: %v", err))
		return
	}
	var err error
	if _, ok := tags[api.TagCM]; ok && a.fo != nil {
		wire.WriteError(w, http.StatusConflict, fmt.Errorf("tag %s: the members of pool %s follow its acting central manager (replicas); it cannot be set by hand", api.TagCM, a.cfg.Pool))
		return
	}
	if cm, ok := tags[api.TagCM]; ok {
		delete(tags, api.TagCM)
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
