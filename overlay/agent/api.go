package agent

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/pond-htc/pond/overlay/gossip"
)

// apiError is the body of every non-2xx API answer.
type apiError struct {
	Error string `json:"error"`
}

// keyRequest is the body of the key management endpoints.
type keyRequest struct {
	Key string `json:"key"`
}

func (a *Agent) routes() {
	a.mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, Health{Status: "ok", Name: a.cfg.Name, Members: len(a.sea.Members())})
	})
	a.mux.HandleFunc("GET /v1/self", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.Self())
	})
	a.mux.HandleFunc("GET /v1/members", a.handleMembers)
	a.mux.HandleFunc("POST /v1/leave", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "leaving"})
		a.Leave()
	})
	a.mux.HandleFunc("PUT /v1/tags", func(w http.ResponseWriter, r *http.Request) {
		var tags map[string]string
		if err := json.NewDecoder(r.Body).Decode(&tags); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{fmt.Sprintf("body: %v", err)})
			return
		}
		for k, v := range tags {
			if err := a.SetTag(k, v); err != nil {
				writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
				return
			}
		}
		writeJSON(w, http.StatusOK, a.sea.LocalMember().Tags)
	})
	a.mux.HandleFunc("GET /v1/keys", func(w http.ResponseWriter, r *http.Request) {
		res, err := a.sea.ListKeys()
		writeKeyResult(w, res, err)
	})
	for op, fn := range map[string]func(string) (*gossip.KeyResult, error){
		"install": a.sea.InstallKey,
		"use":     a.sea.UseKey,
		"remove":  a.sea.RemoveKey,
	} {
		a.mux.HandleFunc("POST /v1/keys/"+op, func(w http.ResponseWriter, r *http.Request) {
			var req keyRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Key == "" {
				writeJSON(w, http.StatusBadRequest, apiError{`body: want {"key": "BASE64"}`})
				return
			}
			res, err := fn(req.Key)
			writeKeyResult(w, res, err)
		})
	}
}

func writeKeyResult(w http.ResponseWriter, res *gossip.KeyResult, err error) {
	if err != nil {
		if res == nil {
			writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
			return
		}
		writeJSON(w, http.StatusInternalServerError, struct {
			apiError
			*gossip.KeyResult
		}{apiError{err.Error()}, res})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (a *Agent) handleMembers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	type kv struct{ k, v string }
	var filters []kv
	for _, t := range q["tag"] {
		k, v, ok := parseTagFilter(t)
		if !ok {
			writeJSON(w, http.StatusBadRequest, apiError{fmt.Sprintf("tag filter %q: want KEY=VALUE", t)})
			return
		}
		filters = append(filters, kv{k, v})
	}
	out := []gossip.Member{}
next:
	for _, m := range a.sea.Members() {
		if status != "" && m.Status != status {
			continue
		}
		for _, f := range filters {
			if got, ok := m.Tags[f.k]; !ok || got != f.v {
				continue next
			}
		}
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
