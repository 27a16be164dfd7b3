package glidein

import (
	"context"

	site "github.com/pond-htc/pond/overlay/glidein"
)

// useLineage records the lineage of the state that holds the resource
// whose glideins are under prefix, as its last apply or refresh named it
// (providers.ApplyRequest.Lineage): its submissions carry it, and list
// leaves out the glideins of another lineage.
func (p *Provider) useLineage(prefix, lineage string) {
	if lineage != "" {
		p.lineages.Store(prefix, lineage)
	}
}

// lineageOf is the lineage useLineage recorded for prefix, "" when none.
func (p *Provider) lineageOf(prefix string) string {
	v, _ := p.lineages.Load(prefix)
	s, _ := v.(string)
	return s
}

// relabeler is a site that can change the state lineage and resource
// address its glideins are labelled with (the EC2 site's tags).
type relabeler interface {
	Relabel(ctx context.Context, id, lineage, address string) error
}

// list is what the site lists under prefix that belongs to this
// resource: everything but the glideins a site labelled with another
// state's lineage (the same working directory's key and address in
// another state, such as a copy of the directory), unless the journal
// records them (sent by a run whose state was never written, which
// had a lineage of its own), which a site that can is told to label
// with this lineage. Adoption, drift, the resource's ids and destroy see
// only these; import sees all.
func (p *Provider) list(ctx context.Context, prefix string) ([]site.Glidein, error) {
	gs, err := p.site.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	lineage := p.lineageOf(prefix)
	if lineage == "" {
		return gs, nil
	}
	var (
		out      = gs[:0:0]
		journal  map[string]*record
		foreign  []string
		recsRead bool
	)
	for _, g := range gs {
		if g.Lineage == "" || g.Lineage == lineage {
			out = append(out, g)
			continue
		}
		if !recsRead {
			recsRead = true
			recs, err := p.journal.list(prefix)
			if err != nil {
				return nil, err
			}
			journal = make(map[string]*record, len(recs))
			for _, r := range recs {
				journal[r.ID] = r
			}
		}
		if r := journal[g.ID]; r != nil {
			if rl, ok := p.site.(relabeler); ok {
				if err := rl.Relabel(ctx, g.ID, lineage, r.Address); err != nil {
					p.logger.Warn("cannot label a glidein with its state's lineage", "id", g.ID, "lineage", lineage, "err", err)
				} else {
					g.Lineage = lineage
				}
			}
			out = append(out, g)
			continue
		}
		foreign = append(foreign, g.SiteID)
	}
	if len(foreign) > 0 {
		p.logger.Debug("leaving alone the glideins of another state", "prefix", prefix, "lineage", lineage, "site_ids", foreign)
	}
	return out, nil
}
