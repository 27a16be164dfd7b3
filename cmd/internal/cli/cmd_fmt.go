package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/planner/config"
)

func (m *meta) cmdFmt(args []string) int {
	fs := m.newFlagSet("fmt", "fmt [-check] [-diff] [-recursive] [-list=false] [DIR or FILE...]")
	check := fs.Bool("check", false, "check formatting only; exit 3 when a file needs formatting")
	diff := fs.Bool("diff", false, "print the differences")
	recursive := fs.Bool("recursive", false, "also format subdirectories")
	list := fs.Bool("list", true, "list the files whose formatting differs")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	paths := fs.Args()
	if len(paths) == 0 {
		paths = []string{m.dir}
	}
	changed := false
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(m.dir, p)
		}
		res, d := config.FormatPath(p, config.FmtOptions{Recursive: *recursive, Write: !*check, Diff: *diff})
		m.snippetSources(d)
		if m.diags(d) {
			return 1
		}
		for _, r := range res {
			changed = true
			if *list {
				rel, err := filepath.Rel(m.dir, r.Path)
				if err != nil {
					rel = r.Path
				}
				fmt.Fprintln(m.stdout, rel)
			}
			if *diff && r.Diff != "" {
				fmt.Fprint(m.stdout, r.Diff)
			}
		}
	}
	if *check && changed {
		return 3
	}
	return 0
}

// snippetSources reads the files d's diagnostics point into, so that
// they are printed with the lines they name, as validate and plan print
// them.
func (m *meta) snippetSources(d hcl.Diagnostics) {
	for _, diag := range d {
		if diag.Subject == nil || diag.Subject.Filename == "" {
			continue
		}
		name := diag.Subject.Filename
		if _, ok := m.files[name]; ok {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		if m.files == nil {
			m.files = map[string]*hcl.File{}
		}
		m.files[name] = &hcl.File{Bytes: src}
	}
}
