package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"sort"
	"strings"
	"time"
)

// Factory is a submit file's job factory, HTCondor's late
// materialization: what makes any one of its jobs on demand, ProcId by
// ProcId, without holding the others. Each queue statement is kept as a
// segment: the submit macros in force at it, its item rows and its
// count. Job builds a proc exactly as Jobs does (the same code path).
type Factory struct {
	f      *File
	opts   Options // after withDefaults
	segs   []segment
	total  int
	digest Digest
	base   map[string]string // Digest.Base
	ref    *Factory          // made from Digest.BaseSource
}

// identity names the attributes a job built over a base ad takes from
// its own build always: who it belongs to and which job it is.
var identity = []string{"Owner", "User", "ClusterId", "ProcId", "GlobalJobId", "QDate"}

// segment is one queue statement of a factory: procs first to
// first+count*len(rows)-1.
type segment struct {
	first, count int
	rows         itemRows
	vars         []string
	vals         map[string]string
	at           map[string]where
	customs      []custom
}

func (s *segment) n() int { return s.count * s.rows.len() }

func (p *Factory) segment(b *jobBuilder, q *Queue, count int, rows itemRows) {
	if count*rows.len() == 0 {
		return
	}
	p.segs = append(p.segs, segment{
		first: b.proc, count: count, rows: rows, vars: q.Vars,
		vals: maps.Clone(b.m.vals), at: maps.Clone(b.at), customs: append([]custom(nil), b.customs...),
	})
	p.total += count * rows.len()
}

// Total is the number of jobs the factory makes (HTCondor's
// TotalSubmitProcs).
func (p *Factory) Total() int { return p.total }

// Job builds the job whose ProcId is proc, as Jobs would have built it.
func (p *Factory) Job(proc int) (Job, error) {
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].first+p.segs[i].n() > proc })
	if proc < p.opts.FirstProc || i == len(p.segs) || proc < p.segs[i].first {
		return nil, fmt.Errorf("job factory: no proc %d (it makes %d)", proc, p.total)
	}
	s := &p.segs[i]
	idx := proc - s.first
	b := &jobBuilder{
		f: p.f, opts: p.opts,
		m:  &macroSet{vals: maps.Clone(s.vals), env: p.opts.LookupEnv},
		at: s.at, customs: s.customs, qdate: p.opts.QDate.Unix(), proc: proc,
	}
	j, err := b.procJob(s.vars, idx/s.count, s.rows.row(idx/s.count), idx%s.count)
	if err != nil || p.base == nil {
		return j, err
	}
	ref, err := p.ref.Job(p.ref.segs[0].first)
	if err != nil {
		return nil, fmt.Errorf("job factory: the base job: %w", err)
	}
	out := maps.Clone(p.base)
	for k, v := range j {
		if rv, ok := ref[k]; !ok || rv != v {
			out[k] = v
		}
	}
	for _, k := range identity {
		if v, ok := j[k]; ok {
			out[k] = v
		} else {
			delete(out, k)
		}
	}
	return out, nil
}

// Digest is what a factory is remade from, without the submitter's
// files or environment: the submit text, the options, and what the
// expansion read of the submit host (included and item files, glob
// matches, the existence of directories, $ENV() variables, and the
// environment only when getenv is used). It is a schedd's durable copy
// of a factory.
type Digest struct {
	Name             string              `json:"name"`
	Source           string              `json:"source"`
	ClusterID        int                 `json:"cluster"`
	Owner            string              `json:"owner"`
	UIDDomain        string              `json:"uid_domain"`
	QDate            int64               `json:"qdate"`
	SubmitDir        string              `json:"submit_dir"`
	Macros           map[string]string   `json:"macros,omitempty"`
	Env              []string            `json:"env,omitempty"`
	Arch             string              `json:"arch"`
	OpSys            string              `json:"opsys"`
	FileSystemDomain string              `json:"filesystem_domain"`
	ScheddName       string              `json:"schedd_name,omitempty"`
	DefaultRequest   [3]string           `json:"default_request"`
	MaxJobs          int                 `json:"max_jobs"`
	Files            map[string]string   `json:"files,omitempty"`
	Globs            map[string][]string `json:"globs,omitempty"`
	Dirs             map[string]bool     `json:"dirs,omitempty"` // path -> is a directory; absent: not there
	EnvVars          map[string]string   `json:"env_vars,omitempty"`
	// Base, when set, is the cluster ad an HTCondor client sent with its
	// submit digest (which holds only the commands that vary from proc to
	// proc): each job is Base with, over it, the attributes in which the
	// job Source builds differs from the one BaseSource builds.
	Base       map[string]string `json:"base,omitempty"`
	BaseSource string            `json:"base_source,omitempty"`
}

// NewFactory makes the job factory of f for opts, reading what it
// needs of this host now, and builds its first job to report a mistake
// in the file before anything is queued.
func (f *File) NewFactory(ctx context.Context, opts Options) (*Factory, error) {
	opts = opts.withDefaults()
	d := Digest{Files: map[string]string{}, Globs: map[string][]string{}, Dirs: map[string]bool{}, EnvVars: map[string]string{}}
	read, glob, stat, env := opts.ReadFile, opts.Glob, opts.Stat, opts.LookupEnv
	rec := opts
	rec.ReadFile = func(p string) ([]byte, error) {
		b, err := read(p)
		if err == nil {
			d.Files[p] = string(b)
		}
		return b, err
	}
	rec.Glob = func(p string) ([]string, error) {
		m, err := glob(p)
		if err == nil {
			d.Globs[p] = m
		}
		return m, err
	}
	rec.Stat = func(p string) (os.FileInfo, error) {
		st, err := stat(p)
		if err == nil {
			d.Dirs[p] = st.IsDir()
		}
		return st, err
	}
	rec.LookupEnv = func(n string) (string, bool) {
		v, ok := env(n)
		if ok {
			d.EnvVars[n] = v
		}
		return v, ok
	}
	p := &Factory{}
	if _, err := f.build(ctx, rec, p); err != nil {
		return nil, err
	}
	p.f, p.opts = f, rec
	if p.total > 0 {
		if _, err := p.Job(p.segs[0].first); err != nil {
			return nil, err
		}
	}
	d.Name, d.Source = f.Name, f.src
	d.ClusterID, d.Owner, d.UIDDomain, d.QDate, d.SubmitDir = opts.ClusterID, opts.Owner, opts.UIDDomain, opts.QDate.Unix(), opts.SubmitDir
	d.Macros, d.Arch, d.OpSys, d.FileSystemDomain, d.ScheddName = opts.Macros, opts.Arch, opts.OpSys, opts.FileSystemDomain, opts.ScheddName
	d.DefaultRequest = [3]string{opts.DefaultRequestCpus, opts.DefaultRequestMemory, opts.DefaultRequestDisk}
	d.MaxJobs = opts.MaxJobs
	for _, s := range p.segs {
		if _, ok := s.vals["getenv"]; ok {
			d.Env = opts.Env
			break
		}
	}
	p.digest = d
	return p, nil
}

// Digest returns the factory's digest, as JSON: that of a factory
// NewFactory made; one remade from a digest keeps none.
func (p *Factory) Digest() ([]byte, error) {
	if p.digest.Source == "" && p.digest.Name == "" {
		return nil, errors.New("job factory: no digest (remade from one)")
	}
	return json.Marshal(p.digest)
}

// Owner is the Owner of the factory's jobs.
func (p *Factory) Owner() string { return p.opts.Owner }

// maxDigest bounds a digest FactoryFromDigest reads.
const maxDigest = 256 << 20

// FactoryFromDigest remakes a factory from its digest (Factory.Digest)
// without reading the host: files, globs and environment come from the
// digest. A directory the digest does not know is taken to be there,
// as HTCondor's schedd does not check the files of the jobs it
// materializes. set, when not nil, may change the options first (a
// schedd gives the jobs its own cluster id and the Owner it
// authenticated). The factory does not keep the digest.
func FactoryFromDigest(ctx context.Context, data []byte, set func(*Options)) (*Factory, error) {
	if len(data) > maxDigest {
		return nil, fmt.Errorf("job factory digest of %d bytes: more than %d", len(data), maxDigest)
	}
	var d Digest
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("job factory digest: %w", err)
	}
	if d.ClusterID <= 0 || d.Owner == "" || d.MaxJobs <= 0 {
		return nil, errors.New("job factory digest: no cluster, owner or job bound")
	}
	f, err := Parse(d.Name, []byte(d.Source))
	if err != nil {
		return nil, err
	}
	opts := Options{
		ClusterID: d.ClusterID, Owner: d.Owner, UIDDomain: d.UIDDomain, QDate: time.Unix(d.QDate, 0),
		SubmitDir: d.SubmitDir, Macros: d.Macros, Env: append([]string{}, d.Env...),
		Arch: d.Arch, OpSys: d.OpSys, FileSystemDomain: d.FileSystemDomain, ScheddName: d.ScheddName,
		DefaultRequestCpus: d.DefaultRequest[0], DefaultRequestMemory: d.DefaultRequest[1], DefaultRequestDisk: d.DefaultRequest[2],
		MaxJobs: d.MaxJobs,
		ReadFile: func(p string) ([]byte, error) {
			if b, ok := d.Files[p]; ok {
				return []byte(b), nil
			}
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		},
		Glob: func(p string) ([]string, error) { return d.Globs[p], nil },
		Stat: func(p string) (os.FileInfo, error) {
			isDir, ok := d.Dirs[p]
			if !ok {
				isDir = true
			}
			return fakeInfo{name: p, dir: isDir}, nil
		},
		LookupEnv: func(n string) (string, bool) { v, ok := d.EnvVars[n]; return v, ok },
	}
	if set != nil {
		set(&opts)
	}
	p := &Factory{}
	if _, err := f.build(ctx, opts, p); err != nil {
		return nil, err
	}
	p.f, p.opts = f, opts.withDefaults()
	if d.Base != nil {
		rf, err := Parse(d.Name+" (base)", []byte(d.BaseSource))
		if err != nil {
			return nil, err
		}
		ref := &Factory{}
		if _, err := rf.build(ctx, opts, ref); err != nil {
			return nil, err
		}
		ref.f, ref.opts = rf, opts.withDefaults()
		if ref.total == 0 {
			return nil, errors.New("job factory digest: the base source queues no job")
		}
		p.base, p.ref = d.Base, ref
	}
	return p, nil
}

// fakeInfo is a file FactoryFromDigest's Stat reports.
type fakeInfo struct {
	name string
	dir  bool
}

func (i fakeInfo) Name() string { return i.name }
func (i fakeInfo) Size() int64  { return 0 }
func (i fakeInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i fakeInfo) ModTime() time.Time { return time.Time{} }
func (i fakeInfo) IsDir() bool        { return i.dir }
func (i fakeInfo) Sys() any           { return nil }

// MaterializeLimits returns the file's max_materialize and max_idle
// (0 when not given), the commands that make condor_submit use a job
// factory, expanded with the file's own definitions.
func (f *File) MaterializeLimits() (maxMaterialize, maxIdle int, err error) {
	get := func(name string) (int, error) {
		v, ok := f.Get(name)
		if !ok {
			return 0, nil
		}
		v = strings.TrimSpace(v)
		fl, isInt, perr := evalArith(v)
		if perr != nil || !isInt || fl < 0 || fl > 1<<31-1 {
			return 0, fmt.Errorf("%s: %s = %q is not a non-negative integer", f.Name, name, v)
		}
		return int(fl), nil
	}
	if maxMaterialize, err = get("max_materialize"); err != nil {
		return 0, 0, err
	}
	if maxIdle, err = get("max_idle"); err != nil {
		return 0, 0, err
	}
	return maxMaterialize, maxIdle, nil
}
