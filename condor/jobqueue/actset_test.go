package jobqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestChangeBatchMatchesOneByOne acts on a queue of mixed jobs (idle,
// held, running, completed and left in the queue, several owners, cluster
// attributes overridden by a job's own, an OtherJobRemoveRequirements, a
// hold reason spelled in lower case, a job's own batch name) with the
// set-based batches of actEach, and on a copy of it job by job with
// change, each job in its own transaction: the jobs' ads, states and
// counts, the history's rows and their order, the outbox's records and
// what each action reports are the same, and the counts the queue keeps
// are those its rows give.
func TestChangeBatchMatchesOneByOne(t *testing.T) {
	ctx := context.Background()
	clock := time.Unix(1_700_000_000, 0)
	setup := func(t *testing.T) *Queue {
		q := openAt(t, clock)
		for _, owner := range []string{"alice", "bob", "carol"} {
			if _, err := q.Submit(ctx, ads(6, owner)); err != nil {
				t.Fatal(err)
			}
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(q.Transition(ctx, JobID{1, 1}, Held, Ad{"HoldReason": `"by hand"`, "HoldReasonCode": "1", "HoldReasonSubCode": "0"}))
		must(q.Transition(ctx, JobID{1, 2}, Running, nil))
		must(q.Transition(ctx, JobID{1, 3}, Running, nil))
		must(q.Apply(ctx, []Change{{ID: JobID{1, 3}, To: Completed, Keep: true, Attrs: Ad{"ExitCode": "0"}}}))
		must(q.SetAttrs(ctx, JobID{1, 4}, Ad{"OtherJobRemoveRequirements": "DAGManJobId == 1", "RequestMemory": "256"}))
		must(q.SetAttrs(ctx, JobID{2, 0}, Ad{"holdreason": `"lower"`, "JobBatchName": `"own"`}))
		// What JSON escapes, and names whose order differs with case:
		// the history's text is the same byte for byte.
		must(q.SetAttrs(ctx, JobID{2, 2}, Ad{"cmd": "\"a<b>&c \u2028\u2029 é \x01\x1f\x7f\t\b\f\r\n \\ \\\"\"", "args": `"x"`, "Zeta": "1", "alpha": "2", "Beta": "\xff\xfe", "removereason": `"old"`}))
		must(q.Transition(ctx, JobID{2, 1}, Running, nil))
		must(q.Transition(ctx, JobID{2, 1}, Held, nil))
		must(q.Transition(ctx, JobID{3, 5}, Running, nil))
		must(q.Transition(ctx, JobID{3, 5}, Suspended, nil))
		return q
	}
	steps := []struct {
		name  string
		sel   Selector
		to    Status
		attrs func(Job) Ad
	}{
		{"hold alice", OwnerJobs("alice"), Held, holdAttrs("mass hold", 1, 0)},
		{"release all", AllJobs(), Idle, releaseAttrs("mass release")},
		{"hold bob's running", Selector{Owner: "bob", Statuses: []Status{Running, Idle}}, Held, holdAttrs("second", 21, 3)},
		{"hold constraint", Selector{All: true, Constraint: func(j Job) bool { return j.ID.Proc%2 == 0 }}, Held, holdAttrs("even", 1, 0)},
		{"remove cluster 1", ClusterJobs(1), Removed, removeAttrs("gone")}, // whole ads in the changes
		{"remove all", AllJobs(), Removed, removeAttrs(`all "quoted" <&>`)},
	}
	record := func(id JobID, from, to Status) []byte {
		if from == Completed {
			return nil
		}
		return []byte(id.String() + ":" + from.String() + ">" + to.String())
	}
	batched, ref := setup(t), setup(t)
	// A removed job's change holds only the attributes the outbox names,
	// or its whole ad.
	attrs := []string{"owner", "Cmd", "OtherJobRemoveRequirements", "NoSuchAttribute"}
	for _, st := range steps {
		ob := &Outbox{Record: record, Attrs: attrs}
		if st.name == "remove cluster 1" {
			ob.Attrs = nil
		}
		var got []Changed
		gotAds := map[JobID]Ad{}
		if err := batched.actEach(WithOutbox(ctx, ob), st.sel, st.to, st.attrs, 4, func(b []Changed) error {
			for _, c := range b {
				if c.Ad != nil {
					gotAds[c.ID] = c.Ad
				}
				c.Ad = nil
				got = append(got, c)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		rob := &Outbox{Record: record}
		want := oneByOne(ctx, t, ref, WithOutbox(ctx, rob), st.sel, st.to, st.attrs)
		if len(want) == 0 {
			t.Fatalf("%s: the reference changed no job; the step tests nothing", st.name)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: changes (-one by one +batched):\n%s", st.name, d)
		}
		// A removed job's change has the attributes named of its ad as
		// the history keeps it.
		wantAds := map[JobID]Ad{}
		if st.to == Removed {
			hist, err := ref.History(ctx, HistoryQuery{Oldest: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range want {
				for _, h := range hist {
					if h.ID == c.ID {
						wantAds[c.ID] = Ad{}
						for k, v := range h.Ad {
							if ob.Attrs == nil || containsFold(ob.Attrs, k) {
								wantAds[c.ID][k] = v
							}
						}
					}
				}
			}
		}
		if d := cmp.Diff(wantAds, gotAds); d != "" {
			t.Errorf("%s: the ads of the changes (-history +batched):\n%s", st.name, d)
		}
		if d := cmp.Diff(rob.Entries, ob.Entries); d != "" {
			t.Errorf("%s: outbox entries (-one by one +batched):\n%s", st.name, d)
		}
		for _, read := range []struct {
			what string
			f    func(*Queue) (any, error)
		}{
			{"queue", func(q *Queue) (any, error) { return q.Query(ctx, AllJobs(), nil) }},
			{"history", func(q *Queue) (any, error) { return q.History(ctx, HistoryQuery{Oldest: true}) }},
			{"history rows", func(q *Queue) (any, error) { return historyRows(ctx, q) }},
			{"outbox", func(q *Queue) (any, error) { return q.PendingOutbox(ctx) }},
			{"counts", func(q *Queue) (any, error) { return q.CountsByOwner(ctx) }},
			{"history_seq", func(q *Queue) (any, error) { return metaValue(ctx, q, "history_seq") }},
			{"cluster attributes", func(q *Queue) (any, error) { return clusterAttrRows(ctx, q) }},
		} {
			w, err := read.f(ref)
			if err != nil {
				t.Fatal(err)
			}
			g, err := read.f(batched)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(w, g); d != "" {
				t.Errorf("%s: %s (-one by one +batched):\n%s", st.name, read.what, d)
			}
		}
		// The counts the queue keeps are those of its rows, counted
		// again.
		for _, q := range []*Queue{batched, ref} {
			kept, recount, err := keptAndRecounted(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(recount, kept); d != "" {
				t.Errorf("%s: job_counts (-recounted from the rows +kept):\n%s", st.name, d)
			}
		}
	}
}

// keptAndRecounted are the rows of job_counts and the same counts made
// again from the jobs' rows, and those of batch_overrides and theirs from
// the jobs' attributes.
func keptAndRecounted(ctx context.Context, q *Queue) (kept, recount []string, err error) {
	read := func(query string) ([]string, error) {
		rows, err := q.r.QueryContext(ctx, query)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var k, n string
			if err := rows.Scan(&k, &n); err != nil {
				return nil, err
			}
			out = append(out, k+" "+n)
		}
		return out, rows.Err()
	}
	for _, p := range [][2]string{
		{`SELECT 'count ' || cluster || ' ' || owner || ' ' || status, n FROM job_counts ORDER BY 1`,
			`SELECT 'count ' || cluster || ' ' || owner || ' ' || status, COUNT(*) FROM jobs GROUP BY cluster, owner, status ORDER BY 1`},
		{`SELECT 'batch ' || cluster, n FROM batch_overrides ORDER BY 1`,
			`SELECT 'batch ' || cluster, COUNT(*) FROM proc_attrs WHERE name = 'JobBatchName' GROUP BY cluster ORDER BY 1`},
	} {
		k, err := read(p[0])
		if err != nil {
			return nil, nil, err
		}
		r, err := read(p[1])
		if err != nil {
			return nil, nil, err
		}
		kept, recount = append(kept, k...), append(recount, r...)
	}
	return kept, recount, nil
}

// openAt opens a queue whose clock stays at now.
func openAt(t *testing.T, now time.Time) *Queue {
	t.Helper()
	q, err := OpenWith(context.Background(), filepath.Join(t.TempDir(), "q.db"), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// oneByOne is actEach's reference: each job sel picks and whose state
// allows it changed with change, in its own transaction.
func oneByOne(ctx context.Context, t *testing.T, q *Queue, octx context.Context, sel Selector, to Status, attrs func(Job) Ad) []Changed {
	t.Helper()
	jobs, err := q.Query(ctx, sel, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []Changed
	for _, j := range jobs {
		if j.Status == to || !CanTransition(j.Status, to) {
			continue
		}
		err := q.tx(octx, func(tx *sql.Tx) error {
			other, err := q.change(octx, tx, Change{ID: j.ID, To: to, Attrs: attrs(j)})
			out = append(out, Changed{ID: j.ID, From: j.Status, OtherRemove: other})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func metaValue(ctx context.Context, q *Queue, key string) (int64, error) {
	var v int64
	err := q.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	return v, err
}

// historyRows are the history's rows as stored, the ads' JSON text as
// it is.
func historyRows(ctx context.Context, q *Queue) ([]string, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT cluster, proc, owner, status, completed, seq, ad FROM history ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c, p, o, st, done, seq, ad string
		if err := rows.Scan(&c, &p, &o, &st, &done, &seq, &ad); err != nil {
			return nil, err
		}
		out = append(out, strings.Join([]string{c, p, o, st, done, seq, ad}, " "))
	}
	return out, rows.Err()
}

func clusterAttrRows(ctx context.Context, q *Queue) ([]string, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT cluster, name, value FROM cluster_attrs ORDER BY cluster, name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c, n, v string
		if err := rows.Scan(&c, &n, &v); err != nil {
			return nil, err
		}
		out = append(out, strings.Join([]string{c, n, v}, " "))
	}
	return out, rows.Err()
}

// TestSetAttrsAllMatchesSetAttrs edits many jobs at once as SetAttrs
// edits each (a value set, one replaced in another spelling, one deleted
// back to its cluster's), and an edit naming a job not in the queue
// changes nothing at all.
func TestSetAttrsAllMatchesSetAttrs(t *testing.T) {
	ctx := context.Background()
	edits := map[JobID]Ad{}
	for p := range 2500 {
		edits[JobID{1, p}] = Ad{"Colour": `"blue"`, "requestmemory": "512"}
	}
	edits[JobID{2, 1}] = Ad{"RequestMemory": " ", "JobPrio": "10"}
	setup := func() *Queue {
		q := openAt(t, time.Unix(1_700_000_000, 0))
		if _, err := q.Submit(ctx, ads(2500, "alice")); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Submit(ctx, ads(3, "bob")); err != nil {
			t.Fatal(err)
		}
		if err := q.SetAttrs(ctx, JobID{2, 1}, Ad{"RequestMemory": "64"}); err != nil {
			t.Fatal(err)
		}
		return q
	}
	all, ref := setup(), setup()
	if err := all.SetAttrsAll(ctx, edits); err != nil {
		t.Fatal(err)
	}
	for id, attrs := range edits {
		if err := ref.SetAttrs(ctx, id, attrs); err != nil {
			t.Fatal(err)
		}
	}
	want, err := ref.Query(ctx, AllJobs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := all.Query(ctx, AllJobs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("jobs (-SetAttrs +SetAttrsAll):\n%s", d)
	}
	if got[0].Ad["Colour"] != `"blue"` {
		t.Fatalf("job 1.0 not edited: %v", got[0].Ad)
	}
	before := got
	bad := map[JobID]Ad{{1, 0}: {"Colour": `"red"`}, {9, 9}: {"Colour": `"red"`}}
	if err := all.SetAttrsAll(ctx, bad); !errors.Is(err, ErrNotFound) {
		t.Errorf("an edit of a job not in the queue: %v, want ErrNotFound", err)
	}
	after, err := all.Query(ctx, AllJobs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("a failed edit changed jobs:\n%s", d)
	}
}

// FuzzSplitOwnAttrs: what splitOwnAttrs reads back from the text
// selectOwnAttrs writes of any attributes is those attributes, and any
// other text is read without a panic, or refused.
func FuzzSplitOwnAttrs(f *testing.F) {
	f.Add("Args", `"7"`, "cmd", "\"a<b>\xff:1:\"")
	f.Add("", "", "4:Args", "3:")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		want := [][2]string{{n1, v1}, {n2, v2}}
		var text strings.Builder
		for _, nv := range want {
			for _, s := range nv {
				text.WriteString(strconv.Itoa(len(s)) + ":" + s)
			}
		}
		got, ok := splitOwnAttrs(text.String())
		if !ok || !cmp.Equal(got, want) {
			t.Fatalf("splitOwnAttrs(%q) = %q, %v; want %q", text.String(), got, ok, want)
		}
		for _, s := range []string{n1 + v1, n1 + ":" + v2, v1} {
			if attrs, ok := splitOwnAttrs(s); ok {
				for _, nv := range attrs {
					if !strings.Contains(s, nv[0]) || !strings.Contains(s, nv[1]) {
						t.Fatalf("splitOwnAttrs(%q) = %q: not of the text", s, attrs)
					}
				}
			}
		}
	})
}

// FuzzAppendJSONString: appendJSONString writes what encoding/json does,
// byte for byte.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", `"x"`, "a<b>&c", "a<b", "b>a", "&", "\u2028\xff\x7f\x1f", `\"`, "plain text 123"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Skip()
		}
		got, err := appendJSONString([]byte("x"), s)
		if err != nil || string(got) != "x"+string(want) {
			t.Fatalf("appendJSONString(%q) = %s, %v; want x%s", s, got, err, want)
		}
	})
}
