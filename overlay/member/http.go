package member

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// Handler serves the membership routes of the agent's API: GET /v1/pond,
// POST /v1/pond/invite and POST /v1/pond/release. When the agent's API
// authenticates its callers, an invitation must come with a pond grant
// bound to its central manager (auth.Claims.MayInvite), and a release from
// a pond grant must be of the pond or central manager the grant names.
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathPond, func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, api.MembershipStatus{Node: m.opts.Name, Membership: m.Current()})
	})
	mux.HandleFunc("POST "+api.PathInvite, func(w http.ResponseWriter, r *http.Request) {
		var inv api.Invitation
		if err := wire.ReadJSON(r, &inv); err != nil {
			wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("invalid invitation: %w", err))
			return
		}
		if c, ok := auth.FromContext(r.Context()); ok {
			if err := c.MayInvite(inv.PondID, inv.CentralManager); err != nil {
				wire.WriteError(w, http.StatusForbidden, err)
				return
			}
		}
		reply, err := m.Invite(r.Context(), inv)
		if err != nil {
			wire.WriteError(w, http.StatusBadRequest, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, reply)
	})
	mux.HandleFunc("POST "+api.PathRelease, func(w http.ResponseWriter, r *http.Request) {
		var req api.ReleaseRequest
		if err := wire.ReadJSON(r, &req); err != nil {
			wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("invalid release: %w", err))
			return
		}
		if c, ok := auth.FromContext(r.Context()); ok {
			// Release only the pond checked here: the node may join
			// another one meanwhile.
			cur := m.Current()
			if cur == nil || (req.PondID != "" && req.PondID != cur.PondID) {
				wire.WriteJSON(w, http.StatusOK, api.ReleaseResult{Node: m.opts.Name})
				return
			}
			if err := c.MayRelease(cur.PondID, cur.CentralManager); err != nil {
				wire.WriteError(w, http.StatusForbidden, err)
				return
			}
			req.PondID = cur.PondID
		}
		res, err := m.Release(r.Context(), req.PondID, "released", req.Drain)
		var bad *api.DrainModeError
		switch {
		case errors.As(err, &bad):
			wire.WriteError(w, http.StatusBadRequest, err)
			return
		case err != nil:
			wire.WriteError(w, http.StatusInternalServerError, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, res)
	})
	return mux
}
