package glidein

import (
	"context"
	"encoding/json"
)

// OpenConfig is a Kind's Open for a site made again from its Config
// alone: it decodes what the site's Describe gave into a C
// (DecodeConfig) and makes the site with newSite.
func OpenConfig[C any, S Site](newSite func(C) (S, error)) func(context.Context, json.RawMessage, KindEnv) (Site, error) {
	return func(_ context.Context, config json.RawMessage, _ KindEnv) (Site, error) {
		var c C
		if err := DecodeConfig(config, &c); err != nil {
			return nil, err
		}
		return SiteOrNil(newSite(c))
	}
}

// SiteOrNil returns s as a Site, or a nil Site with err: a nil pointer
// in a Site is not a nil Site.
func SiteOrNil[S Site](s S, err error) (Site, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}
