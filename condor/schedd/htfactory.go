package schedd

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// HTCondor's clients (condor_submit, the htcondor Python wheel) submit a
// late-materialized cluster without NewProc: SendMaterializeData sends
// the item rows of its queue statement, SetJobFactory its submit digest
// (submit-language text whose queue statement reads the rows from the
// file name SendMaterializeData answered), and SetAttribute(cluster, -1)
// its cluster ad. The commit turns them into one of this schedd's own
// job factories.

// MaxFactoryItems bounds the item data one SendMaterializeData sends.
const MaxFactoryItems = 16 << 20

// htFactory is the job factory an HTCondor client is sending in one
// queue-management transaction.
type htFactory struct {
	limit     int    // SetJobFactory's max_materialize (clamped by the client to the jobs)
	text      string // the submit digest; "" until SetJobFactory
	itemsFile string // the name SendMaterializeData answered; "" when none was sent
	items     []byte // the item rows
}

// itemsFileName is the name the item rows of cluster are known by in its
// digest: HTCondor's schedd answers the file it spooled them to; this
// schedd keeps them in the factory's digest, under this name.
func itemsFileName(cluster int) string {
	return fmt.Sprintf("/condor_spool/%d/condor_submit.%d.items", cluster, cluster)
}

// countRows counts the item rows of data as the queue statement reads
// them: one a line, trailing blank lines dropped.
func countRows(data []byte) int {
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return len(lines)
}

// translatedDigest is an HTCondor submit digest in the terms of this
// schedd's job factory.
type translatedDigest struct {
	source string // submit-language text, FACTORY.* lines taken out
	iwd    string // FACTORY.Iwd: the directory relative paths resolve against
}

// translateDigest checks an HTCondor submit digest and takes out what
// is not the submit language: FACTORY.Iwd (the submitter's working
// directory). It has exactly one queue statement, its last statement;
// one that reads items from a file reads itemsFile, the rows sent with
// SendMaterializeData, and nothing else of the schedd's host. Errors
// name the digest's line.
func translateDigest(text, itemsFile string) (*translatedDigest, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("the submit digest is empty")
	}
	if strings.IndexByte(text, 0) >= 0 {
		return nil, fmt.Errorf("the submit digest holds a NUL byte")
	}
	var out strings.Builder
	d := &translatedDigest{}
	queueAt := 0
	inList := false // inside a queue statement's inline item list "( ... )"
	lines := strings.Split(strings.TrimSuffix(strings.ReplaceAll(text, "\r\n", "\n"), "\n"), "\n")
	for i, line := range lines {
		n := i + 1
		t := strings.TrimSpace(line)
		if inList {
			out.WriteString(line)
			out.WriteByte('\n')
			if strings.HasPrefix(t, ")") {
				inList = false
			}
			continue
		}
		if t == "" || strings.HasPrefix(t, "#") {
			out.WriteString(line)
			out.WriteByte('\n')
			continue
		}
		if queueAt != 0 {
			return nil, fmt.Errorf("submit digest line %d: %q after the queue statement of line %d: a job factory has one queue statement, its last", n, t, queueAt)
		}
		word, rest, _ := strings.Cut(t, " ")
		key, value, isAssign := strings.Cut(t, "=")
		key = strings.TrimSpace(key)
		switch {
		case strings.EqualFold(word, "queue") || strings.EqualFold(t, "queue"):
			queueAt = n
			if err := checkQueue(strings.TrimSpace(rest), itemsFile); err != nil {
				return nil, fmt.Errorf("submit digest line %d: %w", n, err)
			}
			if strings.HasSuffix(t, "(") {
				inList = true
			}
		case isAssign && len(key) > len("FACTORY.") && strings.EqualFold(key[:len("FACTORY.")], "FACTORY."):
			name := key[len("FACTORY."):]
			if strings.EqualFold(name, "Requirements") {
				// The factory's own requirements: those of the cluster
				// ad (MY.Requirements), which its jobs have.
				if !strings.EqualFold(strings.TrimSpace(value), "MY.Requirements") {
					return nil, fmt.Errorf("submit digest line %d: FACTORY.Requirements %q: only MY.Requirements is served", n, strings.TrimSpace(value))
				}
				continue
			}
			if !strings.EqualFold(name, "Iwd") {
				return nil, fmt.Errorf("submit digest line %d: %s is not a job factory setting this schedd knows (FACTORY.Iwd, FACTORY.Requirements)", n, key)
			}
			d.iwd = strings.TrimSpace(value)
			if !filepath.IsAbs(d.iwd) {
				return nil, fmt.Errorf("submit digest line %d: FACTORY.Iwd %q is not an absolute path", n, d.iwd)
			}
			continue
		case strings.EqualFold(word, "include") || strings.HasPrefix(strings.ToLower(word), "include:"):
			return nil, fmt.Errorf("submit digest line %d: include: a job factory's digest reads no file of the schedd's host", n)
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	if inList {
		return nil, fmt.Errorf("submit digest line %d: the queue statement's item list has no closing parenthesis", queueAt)
	}
	if queueAt == 0 {
		return nil, fmt.Errorf("the submit digest has no queue statement")
	}
	d.source = out.String()
	return d, nil
}

// checkQueue checks the arguments of a digest's queue statement: items
// read from a file are the rows sent with SendMaterializeData.
func checkQueue(args, itemsFile string) error {
	lower := strings.ToLower(args)
	at := strings.Index(" "+lower+" ", " from ")
	if at < 0 {
		if itemsFile != "" {
			return fmt.Errorf("queue %s: item data was sent (SendMaterializeData) but the queue statement does not read it", args)
		}
		return nil
	}
	from := strings.TrimSpace(args[at+len("from"):])
	// Options before the file name: TABLE, SLICE [a:b:c].
	for {
		w, r, _ := strings.Cut(from, " ")
		if strings.EqualFold(w, "table") || strings.HasPrefix(w, "[") {
			from = strings.TrimSpace(r)
			continue
		}
		break
	}
	if from == "(" || strings.HasPrefix(from, "(") {
		if itemsFile != "" {
			return fmt.Errorf("queue %s: item data was sent (SendMaterializeData) but the queue statement lists its items inline", args)
		}
		return nil
	}
	if itemsFile == "" {
		return fmt.Errorf("queue %s: items from a file, but no item data was sent (SendMaterializeData): the schedd reads no file of its host for a job factory", args)
	}
	if from != itemsFile {
		return fmt.Errorf("queue %s: items from %q, not from the item data sent (%s)", args, from, itemsFile)
	}
	return nil
}

// factoryDigest makes this schedd's job-factory digest of the factory an
// HTCondor client sent for cluster, with the jobs' Owner owner.
func (s *Schedd) factoryDigest(f *htFactory, cluster int, owner string, clusterAd wire.Ad) ([]byte, error) {
	td, err := translateDigest(f.text, f.itemsFile)
	if err != nil {
		return nil, err
	}
	iwd := td.iwd
	if iwd == "" {
		iwd = adString(clusterAd, "Iwd")
	}
	if iwd == "" || !filepath.IsAbs(iwd) {
		return nil, fmt.Errorf("the submit digest names no absolute FACTORY.Iwd, nor the cluster ad an Iwd")
	}
	fsd := adString(clusterAd, "FileSystemDomain")
	if fsd == "" && s.opts.Config != nil {
		fsd, _ = s.opts.Config.Get("FILESYSTEM_DOMAIN")
	}
	if fsd == "" {
		fsd = s.opts.Name
	}
	// The digest holds only the commands that vary from proc to proc;
	// the rest of each job is the cluster ad.
	cmd := adString(clusterAd, "Cmd")
	if cmd == "" {
		return nil, fmt.Errorf("the cluster ad has no Cmd (executable)")
	}
	exe := "executable = " + cmd + "\n"
	base := make(map[string]string, len(clusterAd))
	for k, v := range clusterAd {
		base[k] = v
	}
	d := submit.Digest{
		Name: fmt.Sprintf("submit digest of cluster %d", cluster), Source: exe + td.source,
		Base: base, BaseSource: exe + "queue 1\n",
		ClusterID: cluster, Owner: owner, UIDDomain: s.uid, QDate: s.now().Unix(), SubmitDir: iwd,
		Arch: condorArch(), OpSys: "LINUX", FileSystemDomain: fsd, ScheddName: s.opts.Name,
		MaxJobs: math.MaxInt32,
	}
	if f.itemsFile != "" {
		d.Files = map[string]string{f.itemsFile: string(f.items)}
	}
	return json.Marshal(d)
}

// condorArch is this host's architecture as HTCondor names it.
func condorArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "X86_64"
	case "arm64":
		return "aarch64"
	case "ppc64le":
		return "ppc64le"
	}
	return strings.ToUpper(runtime.GOARCH)
}

// adString is the string value of attribute name of ad (old ClassAd
// text), "" when it has none.
func adString(ad wire.Ad, name string) string {
	for k, v := range ad {
		if strings.EqualFold(k, name) {
			e, err := classad.ParseExpr(v)
			if err != nil {
				return ""
			}
			a := classad.NewAd()
			a.Set("V", e)
			sv, ok := a.EvalAttr("V").StringValue()
			if !ok {
				return ""
			}
			return sv
		}
	}
	return ""
}

// adInt is the integer value of attribute name of ad; ok false when it
// has none.
func adInt(ad wire.Ad, name string) (int, bool) {
	for k, v := range ad {
		if strings.EqualFold(k, name) {
			i, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || i < 0 || i > math.MaxInt32 {
				return 0, false
			}
			return int(i), true
		}
	}
	return 0, false
}

// commitFactory submits the job factory the transaction carries as this
// schedd's own (SubmitFactory): the same owner checks, queue limits and
// first batch as pondctl condor submit's.
func (m *qmgmt) commitFactory(ctx context.Context) error {
	if len(m.procs) > 0 {
		return refuse(eINVAL, "cluster %d: a job factory (SetJobFactory) and procs made with NewProc in one submit", m.cluster)
	}
	f := m.factory
	if f.text == "" {
		return refuse(eINVAL, "cluster %d: item data was sent (SendMaterializeData) but no job factory (SetJobFactory)", m.cluster)
	}
	owner := m.owner
	if owner == "" {
		owner = m.who.name
	}
	if o := adString(m.clusterAd, "Owner"); o != "" && o != owner && !m.who.admin {
		return refuse(eACCES, "cluster %d names Owner %q but the caller is %q; only an administrator submits for others", m.cluster, o, m.who.name)
	}
	digest, err := m.s.factoryDigest(f, m.cluster, owner, m.clusterAd)
	if err != nil {
		return refuse(eINVAL, "cluster %d: %v", m.cluster, err)
	}
	maxIdle, _ := adInt(m.clusterAd, "JobMaterializeMaxIdle")
	_, err = m.s.SubmitFactory(ctx, &wire.SubmitFactoryRequest{Cluster: m.cluster, Digest: digest, MaxMaterialize: f.limit, MaxIdle: maxIdle})
	return err
}
