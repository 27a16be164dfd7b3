package gossip

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// MembersHandler serves GET /v1/members: the sea's members, filtered by
// status (?status=) and tags (?tag=KEY=VALUE, repeated: all must hold).
func MembersHandler(sea *Sea) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
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
		for _, m := range sea.Members() {
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
}

// KeyRoutes are the routes of the sea's gossip keys, by pattern: GET
// /v1/keys lists them, and POST /v1/keys/install, /use and /remove change
// them across the sea.
func KeyRoutes(sea *Sea) map[string]http.HandlerFunc {
	routes := map[string]http.HandlerFunc{
		"GET " + api.PathKeys: func(w http.ResponseWriter, r *http.Request) {
			res, err := sea.ListKeys()
			writeKeyResult(w, res, err)
		},
	}
	for op, fn := range map[string]func(string) (*api.KeyResult, error){
		"install": sea.InstallKey,
		"use":     sea.UseKey,
		"remove":  sea.RemoveKey,
	} {
		routes["POST "+api.PathKeys+"/"+op] = func(w http.ResponseWriter, r *http.Request) {
			var req api.KeyRequest
			if err := wire.ReadJSON(r, &req); err != nil || req.Key == "" {
				wire.WriteError(w, http.StatusBadRequest, errors.New(`body: want {"key": "BASE64"}`))
				return
			}
			res, err := fn(req.Key)
			writeKeyResult(w, res, err)
		}
	}
	return routes
}

func writeKeyResult(w http.ResponseWriter, res *api.KeyResult, err error) {
	switch {
	case err != nil && res == nil:
		wire.WriteError(w, http.StatusBadRequest, err)
	case err != nil:
		wire.WriteJSON(w, http.StatusInternalServerError, struct {
			api.Error
			*api.KeyResult
		}{api.Error{Error: err.Error()}, res})
	default:
		wire.WriteJSON(w, http.StatusOK, res)
	}
}
