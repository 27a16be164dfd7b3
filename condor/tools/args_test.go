package tools

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
)

// TestParseArgs checks the options each tool accepts, their values and
// aliases, and that an option a tool does not implement is an error
// naming it.
func TestParseArgs(t *testing.T) {
	env := []string{"POND_POOL_ADDR=cm:1"}
	for _, tt := range []struct {
		name string
		spec spec
		args string
		err  string // substring of the error; "" for none
		chk  func(*common) bool
	}{
		{"q totals", specQ, "-totals", "", func(c *common) bool { return c.flags["totals"] != "" }},
		{"q tot alias", specQ, "-tot -allusers", "", func(c *common) bool { return c.flags["totals"] != "" && c.flags["allusers"] != "" }},
		{"q af with options", specQ, "-af:jh Owner Cmd 12", "", func(c *common) bool {
			return reflect.DeepEqual(c.af, []string{"Owner", "Cmd", "12"}) && c.afOpts.jobID && c.afOpts.headings && c.afOpts.sep == " "
		}},
		{"q autoformat comma", specQ, "-autoformat:, A B", "", func(c *common) bool { return c.afOpts.sep == "," && len(c.af) == 2 }},
		{"q af bad letter", specQ, "-af:z A", "unknown letter", nil},
		{"q af without attributes", specQ, "-af -l", "needs attribute names", nil},
		{"q format pairs", specQ, "-format %d ClusterId -format .%d\\n ProcId 3", "", func(c *common) bool {
			return len(c.formats) == 2 && c.formats[1] == formatArg{`.%d\n`, "ProcId"} && reflect.DeepEqual(c.rest, []string{"3"})
		}},
		{"q format missing attr", specQ, "-format %d", "needs a format and an attribute", nil},
		{"q af and format", specQ, "-af A -format %s B", "cannot be used together", nil},
		{"q constraints and", specQ, "-const A -constraint B", "", func(c *common) bool { return c.constraint == "(A) && (B)" }},
		{"q long json limit", specQ, "-l -json -limit 5 -nobatch -wide", "", func(c *common) bool { return c.long && c.json && c.intFlag("limit", 0) == 5 }},
		{"q bad limit", specQ, "-limit x", "not a non-negative number", nil},
		{"q attributes", specQ, "-l -attributes Owner,Cmd", "", func(c *common) bool { return reflect.DeepEqual(c.attributes, []string{"Owner", "Cmd"}) }},
		{"q unknown option", specQ, "-global", "unsupported option -global", nil},
		{"q option of another tool", specQ, "-reason x", "unsupported option -reason", nil},
		{"q double dash", specQ, "--long", "", func(c *common) bool { return c.long }},
		{"q pool", specQ, "-pool other:2", "", func(c *common) bool { return c.pool == "other:2" }},
		{"submit terse batch append", specSubmit, "-terse -batch-name b1 -a x=1 -append y=2 job.sub", "", func(c *common) bool {
			return c.flags["terse"] != "" && c.flags["batch-name"] == "b1" && reflect.DeepEqual(c.multi["append"], []string{"x=1", "y=2"}) &&
				reflect.DeepEqual(c.rest, []string{"job.sub"})
		}},
		{"submit queue takes the rest", specSubmit, "job.sub -queue 3 in ( a -b )", "", func(c *common) bool {
			return c.flags["queue"] == "3 in ( a -b )" && reflect.DeepEqual(c.rest, []string{"job.sub"})
		}},
		{"submit queue without arguments", specSubmit, "-queue", "needs arguments", nil},
		{"submit stdin", specSubmit, "-", "", func(c *common) bool { return reflect.DeepEqual(c.rest, []string{"-"}) }},
		{"submit spool unsupported", specSubmit, "-spool job.sub", "unsupported option -spool", nil},
		{"submit af unsupported", specSubmit, "-af:j X", "unsupported option -af:j", nil},
		{"rm reason all", specAct, "-reason because -all", "", func(c *common) bool { return c.flags["reason"] == "because" && c.flags["all"] != "" }},
		{"rm forcex unsupported", specAct, "-forcex 1.0", "unsupported option -forcex", nil},
		{"wait", specWait, "-wait 30 -num 2 job.log 12.0", "", func(c *common) bool {
			return c.intFlag("wait", 0) == 30 && c.intFlag("num", 0) == 2 && reflect.DeepEqual(c.rest, []string{"job.log", "12.0"})
		}},
		{"wait negative", specWait, "-wait -3 job.log", "not a non-negative number", nil},
		{"history match", specHistory, "-match 2 -af Owner", "", func(c *common) bool { return c.intFlag("match", 0) == 2 }},
		{"status totals", specStatus, "-total -schedd", "", func(c *common) bool { return c.flags["totals"] != "" && c.flags["schedd"] != "" }},
		{"value missing", specAct, "-reason", "needs a value", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseArgs(strings.Fields(tt.args), tt.spec, env, true)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseArgs(%q) = %v, want an error with %q", tt.args, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseArgs(%q): %v", tt.args, err)
			}
			if !tt.chk(c) {
				t.Fatalf("parseArgs(%q) = %+v", tt.args, c)
			}
		})
	}
}

// TestPoolFromEnv checks where the tools find the pool without -pool:
// POND_POOL_ADDR, then _CONDOR_ overrides, then the file CONDOR_CONFIG
// names (with its macros), and an error for a missing file.
func TestPoolFromEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	client := write("client", "CONDOR_HOST = cm.example:9618\nCOLLECTOR_HOST = $(CONDOR_HOST)\nPOND_POOL_ADDR = api.example:4000\n")
	htc := write("htc", "CM = 10.0.0.1\nCONDOR_HOST = $(CM):9618\n")
	sinful := write("sinful", "COLLECTOR_HOST = <10.0.0.2:9618?sock=collector>, 10.0.0.3:9618\n")
	bad := write("bad", "CONDOR_HOST = $(CONDOR_HOST2)\nCONDOR_HOST2 = $(CONDOR_HOST)\n")
	for _, tt := range []struct {
		name string
		env  []string
		want string
		err  string
	}{
		{"nothing", nil, "", ""},
		{"POND_POOL_ADDR wins", []string{"POND_POOL_ADDR=a:1", "CONDOR_CONFIG=" + client}, "a:1", ""},
		{"config POND_POOL_ADDR", []string{"CONDOR_CONFIG=" + client}, "api.example:4000", ""},
		{"config CONDOR_HOST with a macro", []string{"CONDOR_CONFIG=" + htc}, "10.0.0.1:9618", ""},
		{"sinful list", []string{"CONDOR_CONFIG=" + sinful}, "10.0.0.2:9618", ""},
		{"_CONDOR_COLLECTOR_HOST over the file", []string{"CONDOR_CONFIG=" + client, "_CONDOR_COLLECTOR_HOST=other:3"}, "other:3", ""},
		{"_CONDOR_CONDOR_HOST through COLLECTOR_HOST", []string{"CONDOR_CONFIG=" + client, "_CONDOR_CONDOR_HOST=x:5"}, "x:5", ""},
		{"_CONDOR_CONDOR_HOST alone", []string{"_CONDOR_CONDOR_HOST=y:6"}, "y:6", ""},
		{"ONLY_ENV", []string{"CONDOR_CONFIG=ONLY_ENV", "_CONDOR_COLLECTOR_HOST=z:7"}, "z:7", ""},
		{"not an address", []string{"_CONDOR_COLLECTOR_HOST=cm<1"}, "", "not a HOST:PORT address"},
		{"missing file", []string{"CONDOR_CONFIG=" + filepath.Join(dir, "nope")}, "", "does not exist"},
		{"circular macro", []string{"CONDOR_CONFIG=" + bad}, "", "CONDOR_CONFIG"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := poolFromEnv(tt.env)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("poolFromEnv = %q, %v; want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("poolFromEnv = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	// The credentials the file names are the tools' unless the
	// environment names its own.
	env, err := withClientEnv([]string{"CONDOR_CONFIG=" + write("creds", "SEC_TOKEN_DIRECTORY = /d/tokens.d\nPOND_TOKEN_FILE = $(SEC_TOKEN_DIRECTORY)/pond\nPOND_TLS_CA = /d/ca.pem\n")})
	if err != nil || getenv(env, "POND_TOKEN_FILE") != "/d/tokens.d/pond" || getenv(env, "POND_TLS_CA") != "/d/ca.pem" {
		t.Errorf("withClientEnv = %q, %v", env, err)
	}
	env, err = withClientEnv([]string{"CONDOR_CONFIG=" + filepath.Join(dir, "creds"), "POND_TOKEN=t", "POND_TLS_CA=/mine.pem"})
	if err != nil || getenv(env, "POND_TOKEN_FILE") != "" || getenv(env, "POND_TLS_CA") != "/mine.pem" {
		t.Errorf("withClientEnv with the environment's own = %q, %v", env, err)
	}
}

// TestOutputForms checks -af's options and -format against ads.
func TestOutputForms(t *testing.T) {
	ad := func(src string) *classad.Ad {
		a, err := classad.ParseAd(src)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	list := []*classad.Ad{
		ad(`[ClusterId = 3; ProcId = 0; Owner = "alice"; RequestMemory = 2048; Cpus = 1.5; Flag = true; Expr = RequestMemory * 2]`),
		ad(`[ClusterId = 3; ProcId = 1; Owner = "bob"; RequestMemory = 10]`),
	}
	for _, tt := range []struct {
		args, want string
	}{
		{"-af Owner RequestMemory", "alice 2048\nbob 10\n"},
		{"-af:j Owner", "3.0 alice\n3.1 bob\n"},
		{"-af:jh Owner", "ID Owner\n3.0 alice\n3.1 bob\n"},
		{"-af:, Owner RequestMemory", "alice,2048\nbob,10\n"},
		{"-af:t Owner RequestMemory", "alice\t2048\nbob\t10\n"},
		{"-af:lV Owner", "Owner = \"alice\"\nOwner = \"bob\"\n"},
		{"-af:r Expr", "RequestMemory * 2\nundefined\n"},
		{"-af:r RequestMemory+1", "RequestMemory + 1\nRequestMemory + 1\n"},
		{"-af Expr Missing", "4096 undefined\nundefined undefined\n"},
		{"-af:g Owner", "alice\n\nbob\n\n"},
		{"-af:n Owner ProcId", "alice\n0\nbob\n1\n"},
		{`-format %s Owner -format :%d\n RequestMemory`, "alice:2048\nbob:10\n"},
		{`-format %-6s| Owner -format %5.1f\n Cpus`, "alice |  1.5\nbob   |"},
		{`-format %d\n Flag`, "1\n"},
		{`-format %i%%\n ProcId`, "0%\n1%\n"},
		{`-format %d\n Owner`, ""},
		{`-format literal\n Owner`, "literal\nliteral\n"},
	} {
		c, err := parseArgs(strings.Fields(tt.args), specQ, []string{"POND_POOL_ADDR=x:1"}, true)
		if err != nil {
			t.Fatalf("%s: %v", tt.args, err)
		}
		var b bytes.Buffer
		if done, err := printAds(&b, c, list); !done || err != nil {
			t.Fatalf("%s: printAds = %v, %v", tt.args, done, err)
		}
		if b.String() != tt.want {
			t.Errorf("%s printed %q, want %q", tt.args, b.String(), tt.want)
		}
	}
	for _, bad := range []string{"%d %d", "%q", "%5"} {
		c, _ := parseArgs([]string{"-format", bad, "Owner"}, specQ, []string{"POND_POOL_ADDR=x:1"}, true)
		if _, err := printAds(&bytes.Buffer{}, c, list); err == nil {
			t.Errorf("-format %q: no error", bad)
		}
	}
}
