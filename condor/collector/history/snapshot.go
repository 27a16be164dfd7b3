package history

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
)

// Defaults of the snapshot options.
const (
	DefaultSnapshotInterval  = 15 * time.Minute
	DefaultSnapshotCoalesce  = 5 * time.Second
	DefaultSnapshotRetention = 7 * 24 * time.Hour
	DefaultSnapshotMaxBytes  = 256 << 20
	// maxSnapshotAd bounds one stored ad (compressed): a larger one is
	// refused and logged, never truncated.
	maxSnapshotAd = 1 << 20
)

// Snapshot is a machine (slot) ad as the collector held it at a time:
// its attributes' expressions by name. A Gone snapshot says the slot's ad
// left the collector then.
type Snapshot struct {
	At      time.Time         `json:"at"`
	Name    string            `json:"name"`
	Machine string            `json:"machine"`
	Gone    bool              `json:"gone,omitempty"`
	Ad      map[string]string `json:"ad,omitempty"`
}

// ClassAd is the snapshot's ad, which a constraint selects; an attribute
// whose expression does not parse is left out.
func (s Snapshot) ClassAd() *classad.Ad {
	ad := classad.NewAd()
	names := make([]string, 0, len(s.Ad))
	for n := range s.Ad {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		_ = ad.SetExpr(n, s.Ad[n])
	}
	return ad
}

// Volatile reports whether an attribute of a machine ad changes at every
// update without the machine changing (a clock, a load, a usage), so that
// a change of it alone is snapshot at most every SnapshotInterval: the
// attributes MyCurrentTime, LastHeardFrom, LastUpdate,
// UpdateSequenceNumber, KeyboardIdle, ConsoleIdle, Disk, TotalDisk,
// MemoryUsage, DiskUsage, ImageSize, ResidentSetSize, VirtualMemory and
// TotalVirtualMemory; any whose name ends in LoadAvg, Time, Date or
// Timestamp (TotalLoadAvg, EnteredCurrentActivity aside, which ends in
// neither and is volatile too); and any that begins with Recent,
// MonitorSelf, DaemonCore or TotalTime. Every other attribute (Memory,
// Cpus, State, Start, Requirements, the machine's own attributes) is
// material: a change of it is snapshot at once.
func Volatile(name string) bool { return volatileLower(strings.ToLower(name)) }

// volatileLower is Volatile of a name in lower case.
func volatileLower(l string) bool {
	switch l {
	case "mycurrenttime", "lastheardfrom", "lastupdate", "updatesequencenumber", "keyboardidle", "consoleidle",
		"disk", "totaldisk", "memoryusage", "diskusage", "imagesize", "residentsetsize", "virtualmemory",
		"totalvirtualmemory", "enteredcurrentactivity", "enteredcurrentstate":
		return true
	}
	for _, suf := range []string{"loadavg", "time", "date", "timestamp"} {
		if strings.HasSuffix(l, suf) {
			return true
		}
	}
	for _, pre := range []string{"recent", "monitorself", "daemoncore", "totaltime"} {
		if strings.HasPrefix(l, pre) {
			return true
		}
	}
	return false
}

// adHashes returns the hash of an ad's material attributes and of all of
// them, over the sorted names (lower case) and expressions.
func adHashes(ad map[string]string) (material, full string) {
	type attr struct{ lower, name string }
	attrs := make([]attr, 0, len(ad))
	for n := range ad {
		attrs = append(attrs, attr{strings.ToLower(n), n})
	}
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].lower < attrs[j].lower })
	m, f := sha256.New(), sha256.New()
	var buf []byte
	for _, a := range attrs {
		buf = append(append(append(append(buf[:0], a.lower...), 0), ad[a.name]...), 0)
		f.Write(buf)
		if !volatileLower(a.lower) {
			m.Write(buf)
		}
	}
	return hex.EncodeToString(m.Sum(nil)[:16]), hex.EncodeToString(f.Sum(nil)[:16])
}

type snapMark struct {
	material, full string
	at             time.Time
	gone           bool
}

// ObserveAd keeps a snapshot of a slot's ad when it changed materially
// since the last snapshot (an attribute Volatile does not name), or when
// it changed at all and the last snapshot is SnapshotInterval old; an ad
// that did not change is never stored again. A change within
// SnapshotCoalesce of the slot's last snapshot is held rather than stored,
// each later one replacing it, and stored once that period has passed
// (releaseHeld), with the time it was received. ad is not modified and
// must not be afterwards. It never blocks.
func (s *Store) ObserveAd(name, machine string, ad map[string]string) {
	material, full := adHashes(ad)
	now := s.opts.Now()
	s.mu.Lock()
	s.releaseDueLocked(name, now)
	prev, seen := s.snaps[name]
	if seen && !prev.gone && (prev.full == full || (prev.material == material && now.Sub(prev.at) < s.opts.SnapshotInterval)) {
		// As last stored: a change held meanwhile went back.
		delete(s.held, name)
		s.mu.Unlock()
		return
	}
	e := event{snap: &Snapshot{At: now, Name: name, Machine: machine, Ad: ad}, hash: material + ":" + full}
	if seen && !prev.gone && now.Sub(prev.at) < s.opts.SnapshotCoalesce {
		s.held[name] = e
		s.mu.Unlock()
		return
	}
	delete(s.held, name)
	s.snaps[name] = snapMark{material: material, full: full, at: now}
	s.mu.Unlock()
	s.send(e)
}

// releaseDueLocked stores the snapshot held for slot name once
// SnapshotCoalesce has passed since the slot's last one. s.mu is held.
func (s *Store) releaseDueLocked(name string, now time.Time) {
	e, ok := s.held[name]
	if !ok || now.Sub(s.snaps[name].at) < s.opts.SnapshotCoalesce {
		return
	}
	s.storeHeldLocked(name, e, now)
}

// storeHeldLocked stores the snapshot e held for slot name; the slot's
// next snapshot is coalesced from now. s.mu is held.
func (s *Store) storeHeldLocked(name string, e event, now time.Time) {
	delete(s.held, name)
	material, full, _ := strings.Cut(e.hash, ":")
	s.snaps[name] = snapMark{material: material, full: full, at: now}
	s.send(e)
}

// releaseHeld stores the held snapshots whose SnapshotCoalesce has
// passed, or all of them: the writer's each flush, and at the end.
func (s *Store) releaseHeld(all bool) {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, e := range s.held {
		if all || now.Sub(s.snaps[name].at) >= s.opts.SnapshotCoalesce {
			s.storeHeldLocked(name, e, now)
		}
	}
}

// goneSnapshot records that a slot's ad left the collector.
func (s *Store) goneSnapshot(name, machine string) {
	now := s.opts.Now()
	s.mu.Lock()
	if e, ok := s.held[name]; ok {
		// The ad held stood until now.
		s.storeHeldLocked(name, e, now)
	}
	prev, seen := s.snaps[name]
	if !seen || prev.gone {
		s.mu.Unlock()
		return
	}
	s.snaps[name] = snapMark{at: now, gone: true}
	s.mu.Unlock()
	s.send(event{snap: &Snapshot{At: now, Name: name, Machine: machine, Gone: true}})
}

// encodeAd is an ad's stored form: its JSON, deflated.
func encodeAd(ad map[string]string) ([]byte, error) {
	var e adEncoder
	return e.encode(ad)
}

// adEncoder makes ads' stored forms with one deflate compressor, reset
// for each ad rather than made anew (a compressor is about 1 MB of
// tables, which a new one a snapshot would allocate and clear). It is not
// safe for concurrent use: the store's writer alone uses its own.
type adEncoder struct {
	w *flate.Writer
	b bytes.Buffer
}

// encode is ad's stored form (see encodeAd), in a slice of its own.
func (e *adEncoder) encode(ad map[string]string) ([]byte, error) {
	js, err := json.Marshal(ad)
	if err != nil {
		return nil, err
	}
	e.b.Reset()
	if e.w == nil {
		e.w, _ = flate.NewWriter(&e.b, flate.BestSpeed)
	} else {
		e.w.Reset(&e.b)
	}
	e.w.Write(js)
	if err := e.w.Close(); err != nil {
		return nil, err
	}
	if e.b.Len() > maxSnapshotAd {
		return nil, fmt.Errorf("the ad is %d bytes compressed, over %d", e.b.Len(), maxSnapshotAd)
	}
	return bytes.Clone(e.b.Bytes()), nil
}

// decodeAd reads an ad's stored form.
func decodeAd(b []byte) (map[string]string, error) {
	r := flate.NewReader(bytes.NewReader(b))
	defer r.Close()
	js, err := io.ReadAll(io.LimitReader(r, 64*maxSnapshotAd))
	if err != nil {
		return nil, err
	}
	var ad map[string]string
	if err := json.Unmarshal(js, &ad); err != nil {
		return nil, err
	}
	return ad, nil
}

func (s *Store) writeSnapshot(ctx context.Context, tx *sql.Tx, sn *Snapshot, hash string) error {
	var blob []byte
	if !sn.Gone {
		var err error
		if blob, err = s.enc.encode(sn.Ad); err != nil {
			s.opts.Logger.Warn("history: a machine ad not snapshot", "name", sn.Name, "err", err)
			return nil
		}
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO machine_snapshots(at, name, machine, hash, ad) VALUES (?,?,?,?,?)`,
		sn.At.UnixMilli(), sn.Name, sn.Machine, hash, blob)
	return err
}

// loadSnapMarks reads the last snapshot of each slot, so that a restart
// stores no snapshot of an ad that did not change.
func (s *Store) loadSnapMarks(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, `SELECT name, at, hash, COALESCE(length(ad), 0) FROM machine_snapshots
		WHERE id IN (SELECT MAX(id) FROM machine_snapshots GROUP BY name)`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, hash string
		var at, n int64
		if err := rows.Scan(&name, &at, &hash, &n); err != nil {
			return err
		}
		m := snapMark{at: time.UnixMilli(at), gone: n == 0}
		m.material, m.full, _ = strings.Cut(hash, ":")
		s.snaps[name] = m
	}
	return rows.Err()
}

// pruneSnapshots deletes the snapshots older than SnapshotRetention and
// the oldest beyond SnapshotMaxBytes (their compressed ads, and 64 bytes
// a row).
func (s *Store) pruneSnapshots(ctx context.Context) error {
	cut := s.opts.Now().Add(-s.opts.SnapshotRetention).UnixMilli()
	if _, err := s.w.ExecContext(ctx, `DELETE FROM machine_snapshots WHERE at < ?`, cut); err != nil {
		return fmt.Errorf("machine_snapshots: %w", err)
	}
	_, err := s.w.ExecContext(ctx, `DELETE FROM machine_snapshots WHERE id <= (
		SELECT id FROM (SELECT id, SUM(COALESCE(length(ad), 0) + 64) OVER (ORDER BY id DESC) AS total FROM machine_snapshots)
		WHERE total > ? ORDER BY id DESC LIMIT 1)`, s.opts.SnapshotMaxBytes)
	if err != nil {
		return fmt.Errorf("machine_snapshots: %w", err)
	}
	return nil
}

// SnapshotBytes returns the stored size of the snapshots, as the size
// cap counts it.
func (s *Store) SnapshotBytes(ctx context.Context) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(COALESCE(length(ad), 0) + 64), 0) FROM machine_snapshots`).Scan(&n)
	return n, err
}

// querySnapshots returns the snapshots of q: with q.At, each slot's last
// snapshot at or before it (the pool as it was then, without the slots
// gone by then); otherwise the snapshots taken in [q.Since, q.Until].
// q.Match selects by the snapshot's ad (Snapshot.ClassAd).
func (s *Store) querySnapshots(ctx context.Context, q Query, rep *Report) error {
	match := `(? = '' OR machine = ? OR name = ?)`
	var (
		rows *sql.Rows
		err  error
	)
	if !q.At.IsZero() {
		rows, err = s.r.QueryContext(ctx, `SELECT at, name, machine, ad FROM machine_snapshots
			WHERE id IN (SELECT MAX(id) FROM machine_snapshots WHERE at <= ? GROUP BY name) AND COALESCE(length(ad), 0) > 0 AND `+match+`
			ORDER BY name`, q.At.UnixMilli(), q.Machine, q.Machine, q.Machine)
	} else {
		rows, err = s.r.QueryContext(ctx, `SELECT at, name, machine, ad FROM machine_snapshots
			WHERE at >= ? AND at <= ? AND `+match+` ORDER BY at, id`, q.Since.UnixMilli(), q.Until.UnixMilli(), q.Machine, q.Machine, q.Machine)
	}
	if err != nil {
		return fmt.Errorf("history: snapshots: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var sn Snapshot
		var at int64
		var blob []byte
		if err := rows.Scan(&at, &sn.Name, &sn.Machine, &blob); err != nil {
			return fmt.Errorf("history: snapshots: %w", err)
		}
		sn.At = time.UnixMilli(at)
		if len(blob) == 0 {
			sn.Gone = true
		} else if sn.Ad, err = decodeAd(blob); err != nil {
			return fmt.Errorf("history: the snapshot of %s at %s: %w", sn.Name, sn.At.Format(time.RFC3339), err)
		}
		if q.Match != nil && (sn.Gone || !q.Match(sn.ClassAd())) {
			continue
		}
		if len(rep.Snapshots) == q.Limit {
			rep.Truncated = true
			break
		}
		rep.Snapshots = append(rep.Snapshots, sn)
	}
	return rows.Err()
}
