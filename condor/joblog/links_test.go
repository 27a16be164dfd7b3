package joblog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// TestLogLinksInSharedDirectories checks which symbolic links a job log
// is written through: in a directory every user writes to and only its
// owners delete from (as /tmp), a link another user made is not followed
// and the file it names is left as it was; the writer's own link, and a
// link in a directory of its owner's, are.
func TestLogLinksInSharedDirectories(t *testing.T) {
	testenv.NeedRoot(t, "the links are made by another user (lchown)")
	base := t.TempDir()
	shared, private := filepath.Join(base, "tmp"), filepath.Join(base, "home")
	for _, d := range []string{shared, private} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	const other = 65534
	for _, c := range []struct {
		name     string
		dir      string
		linkUID  int
		followed bool
	}{
		{"another user's link in a shared directory", shared, other, false},
		{"the writer's own link in a shared directory", shared, os.Geteuid(), true},
		{"another user's link in a directory of the writer's", private, other, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			victim := filepath.Join(private, strings.ReplaceAll(c.name, " ", "-")+".victim")
			if err := os.WriteFile(victim, []byte("kept\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(c.dir, strings.ReplaceAll(c.name, " ", "-")+".log")
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(link, c.linkUID, c.linkUID); err != nil {
				t.Fatal(err)
			}
			err := NewWriter(link, WriterOptions{}).Write(Event{Type: Submit, Cluster: 1, Time: time.Now()})
			b, _ := os.ReadFile(victim)
			switch {
			case c.followed && (err != nil || !strings.Contains(string(b), "000 (001.000.000)")):
				t.Errorf("the link was not written through: %v, %q", err, b)
			case !c.followed && (err == nil || !strings.Contains(err.Error(), "not followed") || string(b) != "kept\n"):
				t.Errorf("the link was followed: %v, %q", err, b)
			}
		})
	}
	// A plain file in the shared directory is written as before.
	plain := filepath.Join(shared, "plain.log")
	if err := NewWriter(plain, WriterOptions{}).Write(Event{Type: Submit, Cluster: 1, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
}
