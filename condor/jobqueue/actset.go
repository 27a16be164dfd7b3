package jobqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// maxRows bounds the jobs SetAttrsAll reads with one statement, well
// under SQLite's limit on a statement's variables.
const maxRows = 1000

// idValues renders ids as SQL row values, "(?,?),(?,?)...", and their
// arguments.
func idValues(ids []JobID) (string, []any) {
	args := make([]any, 0, 2*len(ids))
	for _, id := range ids {
		args = append(args, id.Cluster, id.Proc)
	}
	return strings.TrimSuffix(strings.Repeat("(?,?),", len(ids)), ","), args
}

// changeBatch makes the state changes cs, to distinct queued jobs, in tx
// with a few statements for them all rather than a few per job: the same
// changes, outbox records and history as change makes job by job (the
// jobs' attributes from transitionAttrs, each terminal job's merged ad in
// the history), in cs's order. It returns each job's change; for a job
// moved to the history, with its ad there and OtherRemove when the ad has
// an OtherJobRemoveRequirements. cs holds at most ActBatch changes.
func (q *Queue) changeBatch(ctx context.Context, tx *sql.Tx, cs []Change) ([]Changed, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	for _, c := range cs {
		if c.To != cs[0].To {
			return nil, fmt.Errorf("job queue: a batch of changes to %s and %s", cs[0].To, c.To)
		}
	}
	ids := make([]JobID, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
		for k := range c.Attrs {
			if protected[strings.ToLower(k)] {
				return nil, fmt.Errorf("job %s: attribute %s cannot be set directly", c.ID, k)
			}
		}
	}
	_, idArgs := idValues(ids)
	states := make(map[JobID]*batchState, len(cs))
	if err := q.queryRows(ctx, tx, selectJobStates, idArgs, func(rows *sql.Rows) error {
		var id JobID
		st := &batchState{}
		if err := rows.Scan(&id.Cluster, &id.Proc, &st.from, &st.starts, &st.holds, &st.owner); err != nil {
			return err
		}
		states[id] = st
		return nil
	}); err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	var fromHeld []JobID
	for _, c := range cs {
		st, ok := states[c.ID]
		if !ok {
			return nil, fmt.Errorf("job %s: %w", c.ID, ErrNotFound)
		}
		if !CanTransition(st.from, c.To) {
			return nil, &TransitionError{ID: c.ID, From: st.from, To: c.To}
		}
		if st.from == Held {
			st.held = Ad{}
			fromHeld = append(fromHeld, c.ID)
		}
	}
	// The last hold's reason of the jobs leaving Held (holdAttrsSQL),
	// deleted as it is read: the attributes transitionAttrs deletes of
	// a job leaving Held, and of no other.
	if len(fromHeld) > 0 {
		_, hargs := idValues(fromHeld)
		if err := q.queryRows(ctx, tx, takeHoldReasons, hargs, func(rows *sql.Rows) error {
			var id JobID
			var n, v string
			if err := rows.Scan(&id.Cluster, &id.Proc, &n, &v); err != nil {
				return err
			}
			states[id].held[n] = v
			return nil
		}); err != nil {
			return nil, fmt.Errorf("job queue: the hold reasons of %d jobs: %w", len(fromHeld), err)
		}
	}
	now := q.now().Unix()
	ob, _ := ctx.Value(outboxKey{}).(*Outbox)
	var (
		updArgs, attrArgs, obArgs []any
		stopped                   []any   // the jobs that stopped running, (cluster, proc) flattened
		gone                      []JobID // the jobs that move to the history
		out                       = make([]Changed, len(cs))
	)
	for i, c := range cs {
		st := states[c.ID]
		set, del, starts, holds := transitionAttrs(c, st.from, st.starts, st.holds, st.held, now)
		if ob != nil && ob.Record != nil {
			if rec := ob.Record(c.ID, st.from, c.To); rec != nil {
				obArgs = append(obArgs, c.ID.Cluster, c.ID.Proc, rec)
			}
		}
		out[i] = Changed{ID: c.ID, From: st.from}
		if c.To.Terminal() && !(c.Keep && c.To == Completed) {
			// Its row and attributes are deleted in this transaction:
			// its change goes into its history ad alone, not written
			// and deleted (the counts end the same: its row leaves
			// its former state's).
			gone = append(gone, c.ID)
			st.set, st.del = set, del
			continue
		}
		updArgs = append(updArgs, c.ID.Cluster, c.ID.Proc, int(c.To), now, starts, holds)
		if i := slices.Index(del, "RemoteHost"); i >= 0 {
			// A job that stopped running: its RemoteHost goes, all the
			// batch's at once below.
			del = slices.Delete(del, i, i+1)
			stopped = append(stopped, c.ID.Cluster, c.ID.Proc)
		}
		if len(del) > 0 && st.from != Held {
			return nil, fmt.Errorf("job %s: a change from %s deletes %s", c.ID, st.from, strings.Join(del, ", "))
		}
		names := make([]string, 0, len(set))
		for k := range set {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			attrArgs = append(attrArgs, c.ID.Cluster, c.ID.Proc, k, set[k])
		}
	}
	// Statements prepared at Open (insertRows), none parsed here.
	if err := q.insertRows(ctx, tx, updateJobStates, updArgs); err != nil {
		return nil, fmt.Errorf("job queue: updating %d jobs: %w", len(cs), err)
	}
	if err := q.insertRows(ctx, tx, deleteRemoteHosts, stopped); err != nil {
		return nil, fmt.Errorf("job queue: the RemoteHost of %d jobs that stopped running: %w", len(stopped)/2, err)
	}
	if err := q.insertRows(ctx, tx, upsertProcAttrs, attrArgs); err != nil {
		return nil, fmt.Errorf("job queue: setting attributes of %d jobs: %w", len(cs), err)
	}
	if len(obArgs) > 0 {
		if err := q.recordBatch(ctx, tx, ob, obArgs); err != nil {
			return nil, err
		}
	}
	if len(gone) > 0 {
		var attrs []string
		if ob != nil {
			attrs = ob.Attrs
		}
		moved, other, err := q.toHistoryBatch(ctx, tx, gone, states, cs[0].To, now, attrs)
		if err != nil {
			return nil, err
		}
		for i := range out {
			if ad, ok := moved[out[i].ID]; ok {
				out[i].OtherRemove = other[out[i].ID]
				out[i].Ad = ad
			}
		}
	}
	return out, nil
}

// recordBatch stores the outbox records args holds, (cluster, proc,
// record) flattened, in as few statements as it can, and adds them to
// ob's pending entries in their order.
func (q *Queue) recordBatch(ctx context.Context, tx *sql.Tx, ob *Outbox, args []any) error {
	seqs := make(map[JobID]int64, len(args)/3)
	if err := q.queryRows(ctx, tx, insertOutbox, args, func(rows *sql.Rows) error {
		var id JobID
		var seq int64
		if err := rows.Scan(&seq, &id.Cluster, &id.Proc); err != nil {
			return err
		}
		seqs[id] = seq
		return nil
	}); err != nil {
		return fmt.Errorf("job queue: recording %d outbox entries: %w", len(args)/3, err)
	}
	for i := 0; i < len(args); i += 3 {
		id := JobID{Cluster: args[i].(int), Proc: args[i+1].(int)}
		ob.pending = append(ob.pending, OutboxEntry{Seq: seqs[id], ID: id, Record: args[i+2].([]byte)})
	}
	return nil
}

// batchState is what changeBatch reads of a job before its change.
type batchState struct {
	from          Status
	starts, holds int
	owner         string
	held          Ad // its own hold reason attributes, when from is Held
	// set and del are the attributes the change sets and deletes of a
	// job it moves to the history.
	set Ad
	del []string
}

// adAttr is an attribute of a job's merged ad, and its name and value
// encoded as encoding/json encodes a map entry of the ad.
type adAttr struct {
	name, value, lower string
	json               []byte
}

// newAdAttr is the attribute name = value.
func newAdAttr(name, value string) (adAttr, error) {
	k, err := appendJSONString(nil, name)
	if err != nil {
		return adAttr{}, err
	}
	k = append(k, ':')
	if k, err = appendJSONString(k, value); err != nil {
		return adAttr{}, err
	}
	return adAttr{name: name, value: value, lower: strings.ToLower(name), json: k}, nil
}

// appendJSONString appends s to b as encoding/json encodes a string, byte
// for byte: a string of printable ASCII that needs no escape (no quote,
// backslash, <, > or &) as it is between quotes, any other by
// encoding/json itself.
func appendJSONString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, err := json.Marshal(s)
			return append(b, j...), err
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// splitOwnAttrs reads a job's own attributes as selectOwnAttrs gives them,
// each name's and value's byte length, a colon and its bytes, and returns
// them; ok is false when text is not of that form.
func splitOwnAttrs(text string) (attrs [][2]string, ok bool) {
	next := func() (string, bool) {
		n, rest, found := strings.Cut(text, ":")
		if !found {
			return "", false
		}
		size, err := strconv.Atoi(n)
		if err != nil || size < 0 || size > len(rest) {
			return "", false
		}
		text = rest[size:]
		return rest[:size], true
	}
	for text != "" {
		name, ok := next()
		if !ok {
			return nil, false
		}
		value, ok := next()
		if !ok {
			return nil, false
		}
		attrs = append(attrs, [2]string{name, value})
	}
	return attrs, true
}

// toHistoryBatch moves the jobs ids, in that order, to the history as
// toHistory does each, with a few statements for them all. Their merged
// ads are not built as maps and encoded one by one: each cluster's
// attributes are read and encoded once, each job's own then merged into
// them (the job's overriding its cluster's, case aside, as load merges
// them), the entries in the order and with the escapes of encoding/json,
// so that the history's text is what toHistory writes byte for byte. It
// returns, for each job, the attributes of its ad that attrs names (its
// whole ad when attrs is nil) and whether it has an
// OtherJobRemoveRequirements.
func (q *Queue) toHistoryBatch(ctx context.Context, tx *sql.Tx, ids []JobID, states map[JobID]*batchState, status Status, now int64, attrs []string) (map[JobID]Ad, map[JobID]bool, error) {
	_, args := idValues(ids)
	var clusters []any
	seen := map[int]bool{}
	for _, id := range ids {
		if !seen[id.Cluster] {
			seen[id.Cluster] = true
			clusters = append(clusters, id.Cluster)
		}
	}
	inClusters := `cluster IN (` + strings.TrimSuffix(strings.Repeat("?,", len(clusters)), ",") + `)`
	clusterAds := make(map[int][]adAttr, len(clusters))
	if err := scanAttrs(ctx, tx, `SELECT cluster, 0, name, value FROM cluster_attrs WHERE `+inClusters, clusters, func(id JobID, a adAttr) {
		clusterAds[id.Cluster] = append(clusterAds[id.Cluster], a)
	}); err != nil {
		return nil, nil, err
	}
	for _, ad := range clusterAds {
		slices.SortFunc(ad, func(a, b adAttr) int { return strings.Compare(a.name, b.name) })
	}
	// Each job's own attributes, read a row a job, then deleted.
	own := make(map[JobID][]adAttr, len(ids))
	addOwn := func(id JobID, attrs [][2]string) error {
		mine := make([]adAttr, 0, len(attrs))
		for _, nv := range attrs {
			a, err := newAdAttr(nv[0], nv[1])
			if err != nil {
				return fmt.Errorf("job %s attribute %s: %w", id, nv[0], err)
			}
			mine = append(mine, a)
		}
		own[id] = mine
		return nil
	}
	var odd []JobID
	if err := q.queryRows(ctx, tx, selectOwnAttrs, args, func(rows *sql.Rows) error {
		var id JobID
		var text string
		if err := rows.Scan(&id.Cluster, &id.Proc, &text); err != nil {
			return err
		}
		attrs, ok := splitOwnAttrs(text)
		if !ok {
			// Not as selectOwnAttrs writes it (a name or value
			// SQLite does not concatenate as it stores it): read
			// its rows themselves.
			odd = append(odd, id)
			return nil
		}
		return addOwn(id, attrs)
	}); err != nil {
		return nil, nil, fmt.Errorf("job queue: reading %d jobs: %w", len(ids), err)
	}
	for _, id := range odd {
		attrs, err := q.ownAttrRows(ctx, tx, id)
		if err == nil {
			err = addOwn(id, attrs)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("job queue: %w", err)
		}
	}
	if err := q.insertRows(ctx, tx, deleteJobAttrs, args); err != nil {
		return nil, nil, fmt.Errorf("job queue: deleting %d jobs: %w", len(ids), err)
	}
	var last int64
	if err := tx.QueryRowContext(ctx, `UPDATE meta SET value = value + ? WHERE key = 'history_seq' RETURNING value`, len(ids)).Scan(&last); err != nil {
		return nil, nil, fmt.Errorf("job queue: %w", err)
	}
	seq := last - int64(len(ids))
	moved := make(map[JobID]Ad, len(ids))
	other := make(map[JobID]bool)
	hist := make([]any, 0, 7*len(ids))
	var merged []adAttr
	var text []byte
	// A job's names dropped and overridden, kept from job to job.
	drop, overridden := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		// Its own attributes as the change leaves them: del deleted,
		// then set's set, each replacing any spelling of its name.
		st := states[id]
		clear(drop)
		for _, n := range st.del {
			drop[strings.ToLower(n)] = true
		}
		for n := range st.set {
			drop[strings.ToLower(n)] = true
		}
		mine := own[id][:0]
		for _, a := range own[id] {
			if !drop[a.lower] {
				mine = append(mine, a)
			}
		}
		for n, v := range st.set {
			a, err := newAdAttr(n, v)
			if err != nil {
				return nil, nil, fmt.Errorf("job queue: job %s attribute %s: %w", id, n, err)
			}
			mine = append(mine, a)
		}
		slices.SortFunc(mine, func(a, b adAttr) int { return strings.Compare(a.name, b.name) })
		clear(overridden)
		for _, a := range mine {
			overridden[a.lower] = true
		}
		merged = merged[:0]
		i := 0
		for _, c := range clusterAds[id.Cluster] {
			if overridden[c.lower] {
				continue
			}
			for i < len(mine) && mine[i].name < c.name {
				merged = append(merged, mine[i])
				i++
			}
			merged = append(merged, c)
		}
		merged = append(merged, mine[i:]...)
		text = append(text[:0], '{')
		ad := Ad{}
		if attrs == nil {
			ad = make(Ad, len(merged))
		}
		for k, a := range merged {
			if k > 0 {
				text = append(text, ',')
			}
			text = append(text, a.json...)
			if attrs == nil || containsFold(attrs, a.name) {
				ad[a.name] = a.value
			}
			if strings.EqualFold(a.name, "OtherJobRemoveRequirements") {
				other[id] = true
			}
		}
		text = append(text, '}')
		seq++
		hist = append(hist, id.Cluster, id.Proc, st.owner, int(status), now, seq, string(text))
		moved[id] = ad
	}
	if err := q.insertRows(ctx, tx, insertHistory, hist); err != nil {
		return nil, nil, fmt.Errorf("job queue: %d jobs to the history: %w", len(ids), err)
	}
	if err := q.insertRows(ctx, tx, deleteJobRows, args); err != nil {
		return nil, nil, fmt.Errorf("job queue: deleting %d jobs: %w", len(ids), err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM cluster_attrs WHERE `+inClusters+` AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.cluster = cluster_attrs.cluster)`, clusters...)
	if err != nil {
		return nil, nil, fmt.Errorf("job queue: the attributes of %d clusters: %w", len(clusters), err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		for _, c := range clusters {
			q.clusters.changed(c.(int))
		}
	}
	return moved, other, nil
}

// ownAttrRows reads job id's own attributes a row each.
func (q *Queue) ownAttrRows(ctx context.Context, tx *sql.Tx, id JobID) ([][2]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name, value FROM proc_attrs WHERE cluster = ? AND proc = ?`, id.Cluster, id.Proc)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	defer rows.Close()
	var attrs [][2]string
	for rows.Next() {
		var nv [2]string
		if err := rows.Scan(&nv[0], &nv[1]); err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
		attrs = append(attrs, nv)
	}
	return attrs, rows.Err()
}

// scanAttrs runs query, whose rows are cluster, proc, name and value,
// and calls add with each.
func scanAttrs(ctx context.Context, tx *sql.Tx, query string, args []any, add func(JobID, adAttr)) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("job queue: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id JobID
		var n, v string
		if err := rows.Scan(&id.Cluster, &id.Proc, &n, &v); err != nil {
			return fmt.Errorf("job queue: %w", err)
		}
		a, err := newAdAttr(n, v)
		if err != nil {
			return fmt.Errorf("job queue: job %s attribute %s: %w", id, n, err)
		}
		add(id, a)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("job queue: %w", err)
	}
	return nil
}

// containsFold reports whether names holds name, case aside.
func containsFold(names []string, name string) bool {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// SetAttrsAll sets the attributes of many queued jobs, edits[id] those of
// job id as SetAttrs sets them, in one transaction: all or none, with a
// few statements for each thousand jobs rather than one per attribute.
// The error wraps ErrNotFound when a job is not in the queue.
func (q *Queue) SetAttrsAll(ctx context.Context, edits map[JobID]Ad) error {
	ids := make([]JobID, 0, len(edits))
	for id, attrs := range edits {
		for k := range attrs {
			if protected[strings.ToLower(k)] {
				return fmt.Errorf("job %s: attribute %s cannot be set directly (use Transition for JobStatus)", id, k)
			}
			if k == "" || strings.ContainsAny(k, " \t\n=") {
				return fmt.Errorf("job %s: invalid attribute name %q", id, k)
			}
		}
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		return ids[i].Cluster < ids[j].Cluster || ids[i].Cluster == ids[j].Cluster && ids[i].Proc < ids[j].Proc
	})
	return q.tx(ctx, func(tx *sql.Tx) error {
		for part := ids; len(part) > 0; {
			n := min(len(part), maxRows)
			chunk := part[:n]
			part = part[n:]
			values, args := idValues(chunk)
			rows, err := tx.QueryContext(ctx, `SELECT cluster, proc FROM jobs WHERE (cluster, proc) IN (VALUES `+values+`)`, args...)
			if err != nil {
				return fmt.Errorf("job queue: %w", err)
			}
			queued := make(map[JobID]bool, n)
			for rows.Next() {
				var id JobID
				if err := rows.Scan(&id.Cluster, &id.Proc); err != nil {
					rows.Close()
					return fmt.Errorf("job queue: %w", err)
				}
				queued[id] = true
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("job queue: %w", err)
			}
			var set []any
			for _, id := range chunk {
				if !queued[id] {
					return fmt.Errorf("job %s: %w", id, ErrNotFound)
				}
				names := make([]string, 0, len(edits[id]))
				for k := range edits[id] {
					names = append(names, k)
				}
				sort.Strings(names)
				for _, k := range names {
					v := edits[id][k]
					if strings.TrimSpace(v) == "" {
						if _, err := q.exec(ctx, tx, deleteAttrSQL, id.Cluster, id.Proc, k); err != nil {
							return fmt.Errorf("job queue: job %s: %w", id, err)
						}
						continue
					}
					set = append(set, id.Cluster, id.Proc, k, v)
				}
			}
			if err := q.insertRows(ctx, tx, upsertProcAttrs, set); err != nil {
				return fmt.Errorf("job queue: setting attributes of %d jobs: %w", n, err)
			}
		}
		return nil
	})
}

// AttrsOf returns the queued jobs among ids with only the attributes
// names of their ads (those of the job's own ad or, failing it, of its
// cluster's, as Get merges them), read with a few queries for each
// hundreds of jobs rather than each job's whole ad. A job not in the queue
// is missing from the answer.
func (q *Queue) AttrsOf(ctx context.Context, ids []JobID, names []string) (map[JobID]Job, error) {
	out := make(map[JobID]Job, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), 400)
		values, args := idValues(ids[:n])
		ids = ids[n:]
		jobs, err := load(ctx, q.r, Selector{}, names, "(j.cluster, j.proc) IN (VALUES "+values+")", args...)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			out[j.ID] = j
		}
	}
	return out, nil
}

// OwnAttrsOf returns the queued jobs among ids with their own attributes
// alone (not their cluster's) and, for each of their clusters, the
// cluster's attributes: their ads as Get merges them, each cluster's
// part read once however many of its jobs ids names, in a few queries for
// each hundreds of jobs. A job not in the queue is missing from the
// answer.
func (q *Queue) OwnAttrsOf(ctx context.Context, ids []JobID) (clusters map[int]Ad, jobs map[JobID]Job, err error) {
	clusters = map[int]Ad{}
	jobs = make(map[JobID]Job, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), 400)
		values, args := idValues(ids[:n])
		ids = ids[n:]
		w := "(j.cluster, j.proc) IN (VALUES " + values + ")"
		rows, err := q.r.QueryContext(ctx, `SELECT j.cluster, j.proc, j.owner, j.status, j.entered FROM jobs j WHERE `+w, args...)
		if err != nil {
			return nil, nil, fmt.Errorf("job queue: %w", err)
		}
		var fresh []any
		for rows.Next() {
			var j Job
			var entered int64
			if err := rows.Scan(&j.ID.Cluster, &j.ID.Proc, &j.Owner, &j.Status, &entered); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("job queue: %w", err)
			}
			j.EnteredStatus = time.Unix(entered, 0)
			j.Ad = Ad{}
			jobs[j.ID] = j
			if _, ok := clusters[j.ID.Cluster]; !ok {
				clusters[j.ID.Cluster] = Ad{}
				fresh = append(fresh, j.ID.Cluster)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("job queue: %w", err)
		}
		if len(fresh) > 0 {
			rows, err := q.r.QueryContext(ctx, `SELECT cluster, name, value FROM cluster_attrs WHERE cluster IN (`+strings.TrimSuffix(strings.Repeat("?,", len(fresh)), ",")+`)`, fresh...)
			if err != nil {
				return nil, nil, fmt.Errorf("job queue: %w", err)
			}
			for rows.Next() {
				var c int
				var n, v string
				if err := rows.Scan(&c, &n, &v); err != nil {
					rows.Close()
					return nil, nil, fmt.Errorf("job queue: %w", err)
				}
				clusters[c][n] = v
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, nil, fmt.Errorf("job queue: %w", err)
			}
		}
		rows, err = q.r.QueryContext(ctx, `SELECT a.cluster, a.proc, a.name, a.value FROM proc_attrs a JOIN jobs j ON j.cluster = a.cluster AND j.proc = a.proc WHERE `+w, args...)
		if err != nil {
			return nil, nil, fmt.Errorf("job queue: %w", err)
		}
		for rows.Next() {
			var id JobID
			var n, v string
			if err := rows.Scan(&id.Cluster, &id.Proc, &n, &v); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("job queue: %w", err)
			}
			if j, ok := jobs[id]; ok {
				j.Ad[n] = v
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("job queue: %w", err)
		}
	}
	return clusters, jobs, nil
}

// MergeAds is a job's ad as Get returns it from its cluster's attributes
// and its own (OwnAttrsOf): its own override its cluster's, case aside,
// with their spelling.
func MergeAds(cluster, own Ad) Ad {
	ad := make(Ad, len(cluster)+len(own))
	for k, v := range cluster {
		ad[k] = v
	}
	for k, v := range own {
		if _, ok := ad[k]; !ok {
			for c := range cluster {
				if strings.EqualFold(c, k) {
					delete(ad, c)
				}
			}
		}
		ad[k] = v
	}
	return ad
}
