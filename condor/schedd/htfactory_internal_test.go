package schedd

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/submit"
)

// TestTranslateDigest checks how an HTCondor submit digest becomes this
// schedd's job factory: FACTORY.Iwd taken out as the submit directory,
// one queue statement, its last, whose items are the ones sent with
// SendMaterializeData or listed inline and never a file of the host;
// each refusal names the digest's line.
func TestTranslateDigest(t *testing.T) {
	t.Parallel()
	const items = "/condor_spool/7/condor_submit.7.items"
	for _, tc := range []struct {
		name      string
		text      string
		itemsFile string
		iwd       string // want
		source    string // want, when not ""
		err       string // want an error holding this
	}{
		{name: "count", text: "FACTORY.Iwd=/home/u\nexecutable=/bin/true\narguments=$(Process)\nQueue 200\n",
			iwd: "/home/u", source: "executable=/bin/true\narguments=$(Process)\nQueue 200\n"},
		{name: "as the wheel sends it", text: "FACTORY.Requirements=MY.Requirements\narguments=proc $(Process)\nFACTORY.Iwd=/\nmax_materialize=20\nItem=\n\nQueue 200 \n",
			iwd: "/", source: "arguments=proc $(Process)\nmax_materialize=20\nItem=\n\nQueue 200 \n"},
		{name: "other factory requirements", text: "FACTORY.Requirements=true\nqueue\n", err: "line 1: FACTORY.Requirements \"true\""},
		{name: "lower-case factory key", text: "factory.iwd = /tmp\nexecutable=/bin/true\nqueue\n", iwd: "/tmp"},
		{name: "items sent", text: "FACTORY.Iwd=/w\nexecutable=/bin/echo\nQueue 1 word,n from " + items + "\n",
			itemsFile: items, iwd: "/w"},
		{name: "items sent, table", text: "executable=/bin/echo\nQueue word,n from TABLE " + items + "\n", itemsFile: items},
		{name: "inline items", text: "executable=/bin/echo\nqueue x from (\n a\n b\n)\n"},
		{name: "comments and blank lines", text: "# made by submit\n\nexecutable=/bin/true\nqueue 3\n\n# end\n"},
		{name: "empty", text: " \n", err: "empty"},
		{name: "NUL", text: "executable=/bin/true\x00\nqueue\n", err: "NUL"},
		{name: "no queue", text: "executable=/bin/true\n", err: "no queue statement"},
		{name: "two queues", text: "executable=/bin/true\nqueue 2\nqueue 3\n", err: "line 3"},
		{name: "statement after queue", text: "queue 2\nexecutable=/bin/true\n", err: "line 2: \"executable=/bin/true\" after the queue statement"},
		{name: "unknown FACTORY key", text: "FACTORY.Hack=1\nqueue\n", err: "line 1: FACTORY.Hack"},
		{name: "relative Iwd", text: "FACTORY.Iwd=home\nqueue\n", err: "not an absolute path"},
		{name: "host file", text: "executable=/bin/cat\nqueue x from /etc/shadow\n", err: "line 2: queue x from /etc/shadow: items from a file, but no item data was sent"},
		{name: "other file than the items", text: "queue x from /etc/passwd\n", itemsFile: items, err: "not from the item data sent"},
		{name: "items sent, not read", text: "queue 3\n", itemsFile: items, err: "does not read it"},
		{name: "items sent, inline list", text: "queue x from (\na\n)\n", itemsFile: items, err: "inline"},
		{name: "unclosed list", text: "queue x from (\na\n", err: "no closing parenthesis"},
		{name: "include", text: "include : /etc/passwd\nqueue\n", err: "line 1: include"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := translateDigest(tc.text, tc.itemsFile)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("translateDigest: %v; want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.iwd != tc.iwd {
				t.Errorf("iwd %q, want %q", d.iwd, tc.iwd)
			}
			if tc.source != "" && d.source != tc.source {
				t.Errorf("source %q, want %q", d.source, tc.source)
			}
			if strings.Contains(strings.ToLower(d.source), "factory.") {
				t.Errorf("source keeps a FACTORY line: %q", d.source)
			}
		})
	}
}

// TestFactoryDigestMakesJobs checks that a translated digest, with its
// item rows, remakes into a factory that builds each proc with its own
// items and the Owner given, reading nothing of the host.
func TestFactoryDigestMakesJobs(t *testing.T) {
	s := &Schedd{uid: "test"}
	s.opts.Name = "schedd@test"
	s.now = time.Now
	f := &htFactory{limit: 2, itemsFile: itemsFileName(9), items: []byte("a\x1f1\nb\x1f2\nc\x1f3\n")}
	// As the htcondor wheel sends it: the commands that vary by proc,
	// the rest in the cluster ad (with proc 0's values).
	f.text = "FACTORY.Requirements=MY.Requirements\narguments=$(word) $(n)\nFACTORY.Iwd=/home/u\nmax_materialize=2\n\nQueue 1 word,n from " + f.itemsFile + "\n"
	clusterAd := map[string]string{"Cmd": `"/bin/echo"`, "Args": `"a 1"`, "Owner": "undefined", "Requirements": "TARGET.Memory > 5",
		"JobSubmitMethod": "2", "RequestMemory": "16", "FileSystemDomain": `"test"`}
	data, err := s.factoryDigest(f, 9, "alice", clusterAd)
	if err != nil {
		t.Fatal(err)
	}
	var d submit.Digest
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Owner != "alice" || d.ClusterID != 9 || d.SubmitDir != "/home/u" || d.FileSystemDomain != "test" {
		t.Fatalf("digest: %+v", d)
	}
	fa, err := submit.FactoryFromDigest(context.Background(), data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fa.Total() != 3 {
		t.Fatalf("%d jobs, want 3", fa.Total())
	}
	for p, want := range []string{`"a 1"`, `"b 2"`, `"c 3"`} {
		j, err := fa.Job(p)
		if err != nil {
			t.Fatal(err)
		}
		if j["Args"] != want || j["Owner"] != `"alice"` || j["ProcId"] != strconv.Itoa(p) || j["ClusterId"] != "9" {
			t.Errorf("proc %d: Args %s Owner %s ProcId %s ClusterId %s", p, j["Args"], j["Owner"], j["ProcId"], j["ClusterId"])
		}
		// The cluster ad's attributes the digest does not change.
		if j["Requirements"] != "TARGET.Memory > 5" || j["JobSubmitMethod"] != "2" || j["RequestMemory"] != "16" || j["Cmd"] != `"/bin/echo"` {
			t.Errorf("proc %d: Requirements %s JobSubmitMethod %s RequestMemory %s Cmd %s: want the cluster ad's",
				p, j["Requirements"], j["JobSubmitMethod"], j["RequestMemory"], j["Cmd"])
		}
	}
}

// FuzzTranslateDigest checks that whatever digest a client sends, the
// translation answers an error or a source with one queue statement and
// no FACTORY line, without panicking.
func FuzzTranslateDigest(f *testing.F) {
	for _, s := range []string{
		"FACTORY.Iwd=/w\nexecutable=/bin/true\nQueue 10\n",
		"queue x from (\na\n)\n",
		"queue word from /condor_spool/1/condor_submit.1.items\n",
		"queue 1 a,b from TABLE [1:3] /condor_spool/1/condor_submit.1.items\n",
		"FACTORY.Iwd=rel\n",
		"include : x\nqueue\n",
	} {
		f.Add(s, "/condor_spool/1/condor_submit.1.items")
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, text, itemsFile string) {
		d, err := translateDigest(text, itemsFile)
		if err != nil {
			return
		}
		if strings.TrimSpace(d.source) == "" {
			t.Fatalf("no source from %q", text)
		}
		if d.iwd != "" && !strings.HasPrefix(d.iwd, "/") {
			t.Fatalf("relative iwd %q from %q", d.iwd, text)
		}
		// The source of a translated digest translates again to itself.
		again, err := translateDigest(d.source, itemsFile)
		if err != nil {
			t.Fatalf("the source %q of %q does not translate again: %v", d.source, text, err)
		}
		if again.source != d.source {
			t.Fatalf("translation of %q is not stable: %q, then %q", text, d.source, again.source)
		}
	})
}
