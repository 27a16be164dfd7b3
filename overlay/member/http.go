package member

import (
	"errors"
	"net/http"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/internal/jsonhttp"
)

// Handler serves the membership routes of the agent's API: GET /v1/pond,
// POST /v1/pond/invite and POST /v1/pond/release.
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathPond, func(w http.ResponseWriter, r *http.Request) {
		jsonhttp.Write(w, http.StatusOK, api.MembershipStatus{Node: m.opts.Name, Membership: m.Current()})
	})
	mux.HandleFunc("POST "+api.PathInvite, func(w http.ResponseWriter, r *http.Request) {
		var inv api.Invitation
		if err := jsonhttp.Decode(r, &inv); err != nil {
			jsonhttp.Error(w, http.StatusBadRequest, "invalid invitation: "+err.Error())
			return
		}
		reply, err := m.Invite(r.Context(), inv)
		if err != nil {
			jsonhttp.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		jsonhttp.Write(w, http.StatusOK, reply)
	})
	mux.HandleFunc("POST "+api.PathRelease, func(w http.ResponseWriter, r *http.Request) {
		var req api.ReleaseRequest
		if err := jsonhttp.Decode(r, &req); err != nil {
			jsonhttp.Error(w, http.StatusBadRequest, "invalid release: "+err.Error())
			return
		}
		res, err := m.Release(r.Context(), req.PondID, "released", req.Drain)
		var bad *api.DrainModeError
		switch {
		case errors.As(err, &bad):
			jsonhttp.Error(w, http.StatusBadRequest, err.Error())
			return
		case err != nil:
			jsonhttp.Error(w, http.StatusInternalServerError, err.Error())
			return
		}
		jsonhttp.Write(w, http.StatusOK, res)
	})
	return mux
}
