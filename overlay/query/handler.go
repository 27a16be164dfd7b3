package query

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// Handler serves POST /v1/query: it runs a tree query with the node as
// root (run, tree.Server.Query). A zero deadline means
// api.DefaultQueryTimeout from now.
func Handler(run func(context.Context, api.Query) (*api.Answer, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
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
		ans, err := run(ctx, q)
		if err != nil {
			wire.WriteError(w, http.StatusBadGateway, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, ans)
	}
}
