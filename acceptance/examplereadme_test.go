package acceptance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
)

// readmeSection is the heading of the part of an example's README whose
// sh blocks are the exact commands to try it on one machine.
const readmeSection = "## On this machine"

// readmeCommands returns the sh blocks of the readmeSection of
// examples/NAME/README.md, joined: what a user types, in order.
func readmeCommands(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", name, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "\n"+readmeSection+"\n")
	if i < 0 {
		t.Fatalf("examples/%s/README.md has no section %q", name, readmeSection)
	}
	text = text[i+len(readmeSection)+2:]
	if j := strings.Index(text, "\n## "); j >= 0 {
		text = text[:j]
	}
	var b strings.Builder
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text, -1) {
		b.WriteString(m[1])
	}
	if b.Len() == 0 {
		t.Fatalf("examples/%s/README.md's section %q has no sh block", name, readmeSection)
	}
	return b.String()
}

// readmeTree lays out what the README's commands need of the repository in
// a fresh directory: examples/NAME (a copy), scripts (the repository's),
// bin/pondctl (the binary under test) and a Makefile whose build does
// nothing, since the binary is built. It returns the root.
func readmeTree(t *testing.T, name string) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join("..", "examples", name)
	dst := filepath.Join(root, "examples", name)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || strings.Contains(e.Name(), ".state") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	scripts, err := filepath.Abs(filepath.Join("..", "scripts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(scripts, filepath.Join(root, "scripts")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(pondBin, filepath.Join(root, "bin", "pondctl")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "Makefile"), []byte("build:\n\t@true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Whatever the commands leave is destroyed, and no agent of the
	// example's directory outlives the test.
	w := &workdir{t: t, dir: dst, env: append(os.Environ(), "NO_COLOR=1", "POND_BIN="+pondBin)}
	t.Cleanup(w.cleanup)
	return root
}

// runReadme runs the README's commands from root with bash -e, as a user
// would type them in one shell, and returns their output.
func runReadme(t *testing.T, root, commands string, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", commands)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's commands failed (%v):\n%s\n--- output\n%s", err, commands, out)
	}
	return string(out)
}

// TestExampleREADMEs runs the commands each example's README gives for
// trying it on one machine, exactly as written: examples/local as is,
// examples/slurm with the Slurm cluster scripts/slurm-one-host.sh starts,
// examples/aws with the moto scripts/moto-ec2.sh starts. The commands
// must succeed and leave nothing running.
func TestExampleREADMEs(t *testing.T) {
	t.Parallel()
	t.Run("local", func(t *testing.T) {
		root := readmeTree(t, "local")
		out := runReadme(t, root, readmeCommands(t, "local"), 3*time.Minute)
		for _, want := range []string{"hello from job 3", "Destroy complete!"} {
			if !strings.Contains(out, want) {
				t.Errorf("the output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("slurm", func(t *testing.T) {
		slurmtest.Require(t)
		root := readmeTree(t, "slurm")
		out := runReadme(t, root, readmeCommands(t, "slurm"), 5*time.Minute)
		for _, want := range []string{"hello from a glidein", "Destroy complete!"} {
			if !strings.Contains(out, want) {
				t.Errorf("the output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("aws", func(t *testing.T) {
		if err := exec.Command("python3", "-c", "import moto.server").Run(); err != nil {
			testenv.SkipOrFailf(t, "moto is not installed (pip install 'moto[server]'): %v", err)
		}
		root := readmeTree(t, "aws")
		out := runReadme(t, root, readmeCommands(t, "aws"), 5*time.Minute)
		for _, want := range []string{"hello from an instance", "Destroy complete!"} {
			if !strings.Contains(out, want) {
				t.Errorf("the output lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestExamplesFormatted: every example is as `pondctl fmt` writes it, and
// has a README.md that gives the exact commands to try it.
func TestExamplesFormatted(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(pondBin, "fmt", "-check", "-recursive", "-no-color", filepath.Join("..", "examples"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("pondctl fmt -check -recursive examples: %v\n%s", err, out)
	}
	dirs, err := os.ReadDir(filepath.Join("..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("..", "examples", d.Name(), "README.md"))
		if err != nil {
			t.Errorf("examples/%s has no README.md: %v", d.Name(), err)
			continue
		}
		if !strings.Contains(string(data), "```sh\n") || !strings.Contains(string(data), "pondctl apply") {
			t.Errorf("examples/%s/README.md gives no commands (a ```sh block with pondctl apply)", d.Name())
		}
	}
}
