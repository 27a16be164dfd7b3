package api

import "github.com/pond-htc/pond/condor/auth"

// Route is one route of the agent's API and the scope a caller's token
// must grant when the agent authenticates its callers.
type Route struct {
	Method string
	Path   string
	// Scope is what the caller's token must grant; "" for a route open to
	// every caller.
	Scope auth.Scope
	// Only says when the agent serves the route: "" always, or OnlyPolicy
	// or OnlyDebug.
	Only string
	// Changes is true for a route that changes the agent.
	Changes bool
}

// Routes lists every route of the agent's API (the daemons' routes under
// wire.PathPrefix apart), in a new slice: what the agent serves and what
// a probe of its authorization must cover.
func Routes() []Route {
	r := []Route{
		{Method: "GET", Path: PathHealth},
		{Method: "GET", Path: PathSelf, Scope: auth.SeaRead},
		{Method: "GET", Path: PathMembers, Scope: auth.SeaRead},
		{Method: "POST", Path: PathLeave, Scope: auth.SeaAdmin, Changes: true},
		{Method: "PUT", Path: PathTags, Scope: auth.SeaAdmin, Changes: true},
		{Method: "GET", Path: PathKeys, Scope: auth.SeaAdmin},
		{Method: "POST", Path: PathQuery, Scope: auth.SeaRead},
		{Method: "POST", Path: PathMatch, Scope: auth.SeaRead},
		{Method: "GET", Path: PathPond, Scope: auth.SeaRead},
		{Method: "POST", Path: PathInvite, Scope: auth.SeaWrite, Changes: true},
		{Method: "POST", Path: PathRelease, Scope: auth.SeaWrite, Changes: true},
		{Method: "GET", Path: PathPolicy, Scope: auth.SeaRead, Only: OnlyPolicy},
		// A node's own token (node/NAME, DAEMON) opens its tunnel or asks
		// for a connect-back check; the handlers refuse any other subject.
		{Method: "POST", Path: PathRelayAttach, Scope: auth.Daemon, Changes: true},
		{Method: "POST", Path: PathRelayCheck, Scope: auth.Daemon},
		{Method: "GET", Path: PathRelay, Scope: auth.SeaRead},
		{Method: "POST", Path: PathRelayDrop, Scope: auth.SeaAdmin, Changes: true},
		{Method: "GET", Path: PathMetrics, Scope: auth.SeaRead},
		{Method: "GET", Path: PathFailover, Scope: auth.SeaRead, Only: OnlyFailover},
		// The pool's central manager pushes its state with its node token;
		// the handler refuses any other subject.
		{Method: "PUT", Path: PathFailover, Scope: auth.Daemon, Only: OnlyFailover, Changes: true},
		{Method: "GET", Path: PathFactory, Scope: auth.SeaRead, Only: OnlyFactory},
		{Method: "PUT", Path: PathFactoryEntries + "{name}", Scope: auth.SeaAdmin, Only: OnlyFactory, Changes: true},
		{Method: "DELETE", Path: PathFactoryEntries + "{name}", Scope: auth.SeaAdmin, Only: OnlyFactory, Changes: true},
		{Method: "PUT", Path: PathFactoryCredentials, Scope: auth.SeaAdmin, Only: OnlyFactory, Changes: true},
		// Every agent serves the flock routes; one that is no pool's
		// central manager answers 409.
		{Method: "GET", Path: PathFlock, Scope: auth.SeaRead},
		{Method: "PUT", Path: PathFlocks + "{name}", Scope: auth.SeaAdmin, Changes: true},
		{Method: "DELETE", Path: PathFlocks + "{name}", Scope: auth.SeaAdmin, Changes: true},
	}
	for _, op := range []string{"install", "use", "remove"} {
		r = append(r, Route{Method: "POST", Path: PathKeys + "/" + op, Scope: auth.SeaAdmin, Changes: true})
	}
	for _, p := range []string{"", "cmdline", "profile", "symbol", "trace"} {
		r = append(r, Route{Method: "GET", Path: PathDebug + p, Scope: auth.SeaAdmin, Only: OnlyDebug})
	}
	return r
}

// Conditions of Route.Only.
const (
	// OnlyPolicy is a route served by an agent that runs a pond policy.
	OnlyPolicy = "policy"
	// OnlyDebug is a route served by an agent started with -enable-debug.
	OnlyDebug = "debug"
	// OnlyFactory is a route served by an agent that runs a pilot
	// factory: one with a data directory that runs its pool's collector.
	OnlyFactory = "factory"
	// OnlyFailover is a route served by a member of a pool that keeps
	// replicas of its central manager (POND_CM_REPLICAS).
	OnlyFailover = "failover"
)

// Pattern is the route's pattern for http.ServeMux: "METHOD PATH".
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// PathDebug is where the agent serves Go's profiler with -enable-debug.
const PathDebug = "/debug/pprof/"
