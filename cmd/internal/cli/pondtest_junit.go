package cli

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/cmd/internal/ui/jsonview"
	"github.com/pond-htc/pond/planner/config"
)

// JUnit XML, as Terraform's test -junit-xml writes it: a testsuite per
// test file, a testcase per run block.

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr,omitempty"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemErr *junitCDATA   `xml:"system-err,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr,omitempty"`
	Body    string `xml:",cdata"`
}

type junitCDATA struct {
	Body string `xml:",cdata"`
}

// writeJUnit writes the results to path as JUnit XML, the diagnostics of
// each run as text (files names the sources of their snippets, rel makes
// their file names relative).
func writeJUnit(path string, results []*testFileResult, files map[string]*hcl.File, rel func(hcl.Diagnostics) hcl.Diagnostics) error {
	doc := junitSuites{Suites: []junitSuite{}}
	for _, f := range results {
		s := junitSuite{Name: f.file.Path}
		for _, r := range f.runs {
			c := junitCase{Name: r.run.Name, Classname: f.file.Path}
			if r.status != jsonview.StatusSkip {
				c.Time = fmt.Sprintf("%.3f", r.elapsed.Seconds())
			}
			var text bytes.Buffer
			if len(r.diags) > 0 {
				_ = config.WriteDiagnostics(&text, files, rel(r.diags), false)
			}
			switch r.status {
			case jsonview.StatusFail:
				s.Failures++
				c.Failure = &junitMessage{Message: r.message, Body: text.String()}
			case jsonview.StatusError:
				s.Errors++
				c.Error = &junitMessage{Message: "Encountered an error: " + r.message, Body: text.String()}
			case jsonview.StatusSkip:
				s.Skipped++
				c.Skipped = &junitMessage{Message: "not run: an earlier run errored, or the test was interrupted"}
			default:
				if text.Len() > 0 {
					c.SystemErr = &junitCDATA{Body: text.String()}
				}
			}
			s.Tests++
			s.Cases = append(s.Cases, c)
		}
		if len(f.leftOver) > 0 {
			s.Errors++
			s.Tests++
			s.Cases = append(s.Cases, junitCase{Name: "clean-up", Classname: f.file.Path,
				Error: &junitMessage{Message: fmt.Sprintf("%d resources were left after the test: %v", len(f.leftOver), f.leftOver)}})
		}
		doc.Suites = append(doc.Suites, s)
	}
	out, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	out = append([]byte(xml.Header), append(out, '\n')...)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".junit-*.xml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
