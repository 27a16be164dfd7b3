package schedd

import (
	"context"
	"strings"

	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// ignoredAttrs returns the attributes pond does not act on
// (submit.IgnoredAttrs) that the cluster a queue-management transaction
// built asks for: in its cluster ad, any proc's own ad over it, or, for a
// job factory, the commands of its submit digest.
func (m *qmgmt) ignoredAttrs() []submit.IgnoredAttr {
	lower := func(ad wire.Ad) map[string]string {
		out := make(map[string]string, len(ad))
		for k, v := range ad {
			out[strings.ToLower(k)] = v
		}
		return out
	}
	cluster := lower(m.clusterAd)
	seen := map[string]bool{}
	var out []submit.IgnoredAttr
	add := func(as []submit.IgnoredAttr) {
		for _, a := range as {
			if !seen[a.Attr] {
				seen[a.Attr] = true
				out = append(out, a)
			}
		}
	}
	add(submit.Ignored(func(k string) (string, bool) { v, ok := cluster[k]; return v, ok }))
	for _, p := range m.procs {
		// Only a proc that sets one of the attributes (or the file one
		// of them is about) can add to the cluster's.
		own := false
		for k := range p {
			if submit.IsIgnoredAttr(k) || strings.EqualFold(k, "In") || strings.EqualFold(k, "Out") || strings.EqualFold(k, "Err") {
				own = true
				break
			}
		}
		if !own {
			continue
		}
		pl := lower(p)
		add(submit.Ignored(func(k string) (string, bool) {
			if v, ok := pl[k]; ok {
				return v, true
			}
			v, ok := cluster[k]
			return v, ok
		}))
	}
	if m.factory != nil {
		add(digestIgnored(m.factory.text))
	}
	return out
}

// digestIgnored returns the attributes of submit.IgnoredAttrs whose
// commands a job factory's submit digest sets (the commands that vary
// from proc to proc; the others are in the cluster ad).
func digestIgnored(digest string) []submit.IgnoredAttr {
	var out []submit.IgnoredAttr
	for line := range strings.SplitSeq(digest, "\n") {
		key, _, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key = strings.ToLower(strings.TrimSpace(key))
		for _, a := range submit.IgnoredAttrs {
			if a.Command == key {
				out = append(out, a)
			}
		}
	}
	return out
}

// warnIgnored tells the submitter of cluster that pond does not act on
// attrs: in the schedd's log, and as a generic event (008) in the job
// log of the cluster's first job, once, after its submit event. It
// returns the warning's text for the client.
func (s *Schedd) warnIgnored(ctx context.Context, user string, cluster int, attrs []submit.IgnoredAttr) string {
	names := submit.IgnoredText(attrs)
	text := "pond does not act on these job attributes (submit commands), the job runs as if they were not set: " + names
	s.log.Warn("submitted jobs ask for what pond does not act on", "user", user, "cluster", cluster, "attributes", names)
	s.writeEvent(ctx, jobqueue.JobID{Cluster: cluster, Proc: 0}, nil, joblog.Event{Type: joblog.Generic, Message: text})
	return text
}
