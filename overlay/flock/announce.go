// Package flock organises flocking between the pools of a sea. Each pool's
// central-manager agent announces its spare capacity in a serf tag with an
// expiry (Announcement); each keeps the pools willing to take its jobs,
// filtered by both sides' policies and sorted by the RTT serf's network
// coordinates estimate (Willing); and the Manager ties both to the flock
// configurations the `flock` resource gives it (Config). The pool's schedd
// flocks its idle jobs to the willing pools in that order
// (condor/schedd, flock.go).
package flock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// Serf tags of a central manager's announcement. Serf bounds a member's
// tags to 512 bytes in all, so the announcement is short: the pool's name
// and API address are already in the member's pool and api tags.
const (
	// TagSpare is the spare capacity and the announcement's expiry
	// (EncodeSpare).
	TagSpare = "flk"
	// TagAccept lists the pools that may flock to the pool, separated by
	// commas; absent, any pool of the sea may.
	TagAccept = "flka"
)

// maxAcceptBytes bounds TagAccept's value: what is left of serf's 512
// bytes once the other tags are set.
const maxAcceptBytes = 160

// spareVersion begins TagSpare's value, for the format to change later.
const spareVersion = "1"

// EncodeSpare writes capacity and the expiry as TagSpare's value:
// "1:IDLE:CPUS:MEMORY:GPUS:EXPIRES" (EXPIRES in Unix seconds).
func EncodeSpare(c api.FlockCapacity, expires time.Time) string {
	return strings.Join([]string{spareVersion, strconv.Itoa(c.IdleSlots), strconv.Itoa(c.Cpus),
		strconv.Itoa(c.Memory), strconv.Itoa(c.Gpus), strconv.FormatInt(expires.Unix(), 10)}, ":")
}

// DecodeSpare reads TagSpare's value.
func DecodeSpare(s string) (api.FlockCapacity, time.Time, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 || parts[0] != spareVersion {
		return api.FlockCapacity{}, time.Time{}, fmt.Errorf("flock: spare capacity %q: want %s:IDLE:CPUS:MEMORY:GPUS:EXPIRES", s, spareVersion)
	}
	var n [5]int64
	for i, p := range parts[1:] {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || v < 0 {
			return api.FlockCapacity{}, time.Time{}, fmt.Errorf("flock: spare capacity %q: field %d is not a count", s, i+1)
		}
		n[i] = v
	}
	const maxCount = 1 << 40
	for _, v := range n[:4] {
		if v > maxCount {
			return api.FlockCapacity{}, time.Time{}, fmt.Errorf("flock: spare capacity %q: count out of range", s)
		}
	}
	return api.FlockCapacity{IdleSlots: int(n[0]), Cpus: int(n[1]), Memory: int(n[2]), Gpus: int(n[3])}, time.Unix(n[4], 0), nil
}

// EncodeAccept writes the pools that may flock in as TagAccept's value;
// nil (any pool) is the empty string, which removes the tag. A list too
// long for serf's tags is an error.
func EncodeAccept(pools []string) (string, error) {
	if pools == nil {
		return "", nil
	}
	if len(pools) == 0 {
		// Nobody: a name no pool has.
		return ",", nil
	}
	s := strings.Join(pools, ",")
	if len(s) > maxAcceptBytes {
		return "", fmt.Errorf("flock: %d pools may flock in, %d bytes of names: more than the %d the announcement holds", len(pools), len(s), maxAcceptBytes)
	}
	return s, nil
}

// decodeAccept reads TagAccept's value: nil when absent.
func decodeAccept(s string, ok bool) []string {
	if !ok {
		return nil
	}
	out := []string{}
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Member is what Parse needs of a serf member: its name, status and tags.
type Member struct {
	Name   string
	Status string
	Tags   map[string]string
}

// Tags of pond's gossip that an announcement reads (overlay/gossip's
// TagRole, TagPool and TagAPI; repeated to keep this package free of
// serf).
const (
	tagRole = "role"
	tagPool = "pool"
	tagAPI  = "api"
	roleCM  = "cm"
	// tagEpoch is overlay/failover's TagEpoch: the member acts as its
	// pool's central manager at that epoch.
	tagEpoch = "epoch"
)

// ErrNoAnnouncement is returned by Parse for a member that announces
// nothing: not a live central manager of a pool, or one without TagSpare.
var ErrNoAnnouncement = errors.New("flock: no announcement")

// Parse reads a member's announcement. A member that is not alive, not a
// pool's central manager (its declared one, role cm, or a replica acting
// as one, with an epoch tag) or announces nothing gives
// ErrNoAnnouncement; one whose announcement expired before now is treated
// alike, so that a stale announcement vanishes from every view.
func Parse(m Member, now time.Time) (api.FlockAnnouncement, error) {
	spare, ok := m.Tags[TagSpare]
	epoch := parseEpoch(m.Tags[tagEpoch])
	if !ok || m.Status != "alive" || (m.Tags[tagRole] != roleCM && epoch == 0) || m.Tags[tagPool] == "" || m.Tags[tagAPI] == "" {
		return api.FlockAnnouncement{}, ErrNoAnnouncement
	}
	c, exp, err := DecodeSpare(spare)
	if err != nil {
		return api.FlockAnnouncement{}, err
	}
	if !now.Before(exp) {
		return api.FlockAnnouncement{}, ErrNoAnnouncement
	}
	acc, has := m.Tags[TagAccept]
	return api.FlockAnnouncement{Pool: m.Tags[tagPool], Node: m.Name, API: m.Tags[tagAPI], FlockCapacity: c, Expires: exp,
		Accept: decodeAccept(acc, has), Epoch: epoch}, nil
}

// parseEpoch reads an epoch tag: 0 when absent or not a positive whole
// number.
func parseEpoch(s string) int64 {
	e, err := strconv.ParseInt(s, 10, 64)
	if err != nil || e < 0 {
		return 0
	}
	return e
}

// Current keeps one announcement per pool, the one its acting central
// manager makes: the highest epoch (fencing makes the one with the
// highest the manager the pool's members follow), then the first name. A pool's announcements may overlap while its manager
// changes (a replica takes over, or hands the pool back, before the
// other's announcement expires); only one counts. anns are sorted by
// pool; so is the result.
func Current(anns []api.FlockAnnouncement) []api.FlockAnnouncement {
	var out []api.FlockAnnouncement
	for _, a := range anns {
		if n := len(out); n > 0 && strings.EqualFold(out[n-1].Pool, a.Pool) {
			if b := out[n-1]; a.Epoch > b.Epoch || (a.Epoch == b.Epoch && a.Node < b.Node) {
				out[n-1] = a
			}
			continue
		}
		out = append(out, a)
	}
	return out
}
