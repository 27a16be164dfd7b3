package api

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/pond-htc/pond"

// leafAllowed are the only packages of the module that this package may
// import, directly or not: the daemons' wire types, the ring's
// identifiers and the table of the agent's knobs, none of them an engine
// of the overlay.
var leafAllowed = []string{
	module + "/condor/auth",
	module + "/condor/classad",
	module + "/condor/wire",
	module + "/overlay/knobs",
	module + "/overlay/ring",
}

// leafForbidden are the libraries the overlay's engines run on, which no
// client of the agent's API may pull in.
var leafForbidden = []string{
	"github.com/hashicorp/serf",
	"github.com/hashicorp/memberlist",
	"github.com/hashicorp/yamux",
}

// TestLeaf walks the imports of this package (without its tests),
// recursively, and fails on any import of serf, memberlist or yamux, and on
// any package of the module outside leafAllowed: a client of the API needs
// this package alone, and the engines import it, not the reverse.
func TestLeaf(t *testing.T) {
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(here)) // overlay/api -> the module
	seen := map[string]bool{}
	var walk func(path string, chain []string)
	walk = func(path string, chain []string) {
		if seen[path] {
			return
		}
		seen[path] = true
		chain = append(chain, path)
		for _, f := range leafForbidden {
			if path == f || strings.HasPrefix(path, f+"/") {
				t.Errorf("imports %s: %s", f, strings.Join(chain, " -> "))
				return
			}
		}
		if path != module+"/overlay/api" && (path == module || strings.HasPrefix(path, module+"/")) && !slices.Contains(leafAllowed, path) {
			t.Errorf("imports %s, a package of the module outside the leaf's allowed list: %s", path, strings.Join(chain, " -> "))
			return
		}
		var pkg *build.Package
		if rel, ok := strings.CutPrefix(path, module+"/"); ok {
			pkg, err = build.Default.ImportDir(filepath.Join(root, filepath.FromSlash(rel)), 0)
		} else {
			pkg, err = build.Default.Import(path, root, 0)
		}
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		if pkg.Goroot {
			return // the standard library imports nothing outside it
		}
		for _, imp := range pkg.Imports {
			if imp == "C" || imp == "unsafe" {
				continue
			}
			walk(imp, chain)
		}
	}
	walk(module+"/overlay/api", nil)
	if len(seen) < 2 {
		t.Fatalf("walked only %d packages: the walk is broken", len(seen))
	}
}
