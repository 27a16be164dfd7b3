package startd

import (
	"context"
	"errors"
	"hash/fnv"
	"net/http"
	"sort"
	"strconv"

	"github.com/pond-htc/pond/condor/wire"
)

// volatileAttrs are the slot ad's attributes whose value changes with the
// clock alone: a change of theirs does not make a slot's ad changed (see
// adHash), so they reach the collector with the slot's next change or the
// periodic refresh (UPDATE_INTERVAL), as HTCondor's startd refreshes them
// with its periodic updates.
var volatileAttrs = map[string]bool{
	"RetirementTimeRemaining": true,
}

// slotUpdate is a slot's ad as the startd sends it, with its private
// attributes and its hash.
type slotUpdate struct {
	name    string
	ad      wire.Ad
	private wire.Ad // nil when none
	hash    uint64
}

// adHash hashes an ad and its private attributes, but for volatileAttrs.
func adHash(ad, private wire.Ad) uint64 {
	h := fnv.New64a()
	for i, a := range []wire.Ad{ad, private} {
		keys := make([]string, 0, len(a))
		for k := range a {
			if i == 1 || !volatileAttrs[k] {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			_, _ = h.Write([]byte(k))
			_, _ = h.Write([]byte{0})
			_, _ = h.Write([]byte(a[k]))
			_, _ = h.Write([]byte{0})
		}
		_, _ = h.Write([]byte{1})
	}
	return h.Sum64()
}

// slotUpdates renders every slot's ad as sent to the collector: the
// partitionable and static slots', each followed by its dynamic slots'.
// A partitionable or unclaimed slot offers its claim id privately, and a
// claimed one the id of a claim that may preempt it.
func (s *Startd) slotUpdates() []slotUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []slotUpdate
	add := func(sl *slot, claimID string) {
		u := slotUpdate{name: sl.name, ad: wire.FromClassAd(s.slotAd(sl))}
		if claimID != "" {
			u.private = wire.Ad{"ClaimId": strconv.Quote(claimID)}
		}
		u.hash = adHash(u.ad, u.private)
		out = append(out, u)
	}
	offered := func(sl *slot) string {
		if sl.preemptID != "" && sl.preempting == nil && !sl.retire {
			return sl.preemptID
		}
		return ""
	}
	for _, sl := range s.slots {
		if sl.partitionable || sl.state == "Unclaimed" {
			add(sl, sl.claimID)
		} else {
			add(sl, offered(sl))
		}
		for _, c := range sl.children {
			add(c, offered(c))
		}
	}
	return out
}

// Advertise sends every slot's ad to the collector now.
func (s *Startd) Advertise(ctx context.Context) error { return s.advertise(ctx, true) }

// advertise updates the collector: with every slot's ad when full, or when
// the startd does not know what the collector holds (its first update,
// after a failed one, or with another collector); else only with the ads
// that changed since the last successful update, and the names of the
// slots that are gone, as a partial update, sending nothing when nothing
// changed. A collector that wants a full update (it lost the source's
// ads) or took the partial update as a full one gets a full one at once.
func (s *Startd) advertise(ctx context.Context, full bool) error {
	s.adv.Lock()
	defer s.adv.Unlock()
	addr := s.opts.Collector()
	if addr == "" {
		return nil
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	s.advMu.Lock()
	s.advTo, s.advStop = addr, stop
	s.advMu.Unlock()
	defer func() {
		s.advMu.Lock()
		s.advTo, s.advStop = "", nil
		s.advMu.Unlock()
	}()
	if s.sentTo != addr {
		s.sent = nil
	}
	full = full || s.sent == nil
	ups := s.slotUpdates()
	req := wire.UpdateRequest{Type: wire.TypeMachine, Source: s.source(), Private: map[string]wire.Ad{}, Partial: !full}
	now := make(map[string]uint64, len(ups))
	for _, u := range ups {
		now[u.name] = u.hash
		if old, ok := s.sent[u.name]; full || !ok || old != u.hash {
			req.Ads = append(req.Ads, u.ad)
			if u.private != nil {
				req.Private[u.name] = u.private
			}
		}
	}
	if !full {
		for name := range s.sent {
			if _, ok := now[name]; !ok {
				req.Removed = append(req.Removed, name)
			}
		}
		sort.Strings(req.Removed)
		if len(req.Ads) == 0 && len(req.Removed) == 0 {
			return nil
		}
	}
	coll := s.peer(addr).Collector()
	err := coll.Update(ctx, &req)
	if !full && wantsFull(err) {
		s.log.Info("the collector wants every slot's ad", "collector", addr, "why", err)
		req = wire.UpdateRequest{Type: wire.TypeMachine, Source: s.source(), Private: map[string]wire.Ad{}}
		for _, u := range ups {
			req.Ads = append(req.Ads, u.ad)
			if u.private != nil {
				req.Private[u.name] = u.private
			}
		}
		err = coll.Update(ctx, &req)
	}
	if err != nil {
		// What the collector holds is unknown: the next update is full.
		s.sent, s.sentTo = nil, ""
		return err
	}
	s.sent, s.sentTo = now, addr
	return nil
}

// wantsFull reports whether a partial update's error asks for a full one:
// the collector holds none of the source's ads (409), or it predates
// partial updates and replaced the source's ads with the partial update's.
func wantsFull(err error) bool {
	var we *wire.Error
	return errors.Is(err, wire.ErrPartialIgnored) || errors.As(err, &we) && we.Status == http.StatusConflict
}
