package batch

import (
	"sort"
	"strconv"

	"github.com/pond-htc/pond/overlay/glidein"
)

// Latest is the glideins a site's List reports, one of each ID: of
// several jobs with one ID (a glidein submitted again after it ended),
// the one not ended, or else the last submitted (the greater job ID).
type Latest map[string]glidein.Glidein

// Add adds g unless a glidein of its ID already there is to be reported
// rather than it.
func (l Latest) Add(g glidein.Glidein) {
	if old, ok := l[g.ID]; ok && !Newer(g, old) {
		return
	}
	l[g.ID] = g
}

// Sorted is the glideins, by ID.
func (l Latest) Sorted() []glidein.Glidein {
	gs := make([]glidein.Glidein, 0, len(l))
	for _, g := range l {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].ID < gs[j].ID })
	return gs
}

// Newer reports whether g is to be reported rather than old, of the same
// ID: a glidein not ended wins, then the later job.
func Newer(g, old glidein.Glidein) bool {
	if g.State.Ended() != old.State.Ended() {
		return !g.State.Ended()
	}
	a, _ := strconv.ParseUint(g.SiteID, 10, 64)
	b, _ := strconv.ParseUint(old.SiteID, 10, 64)
	return a > b
}
