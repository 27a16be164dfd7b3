package agent

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// rssKiB reads VmRSS of a process.
func rssKiB(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, sc.Err()
}

// BenchmarkAgentIdle starts an agent (the binary in $POND_BIN, else this
// test binary), waits for its API, lets it idle in a sea of two, and
// reports the time to ready and its resident memory. Its API, on
// loopback, is served without authentication (-insecure-api): no
// working directory's authority is made for it.
func BenchmarkAgentIdle(b *testing.B) {
	bin := os.Getenv("POND_BIN")
	var prefix []string
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		bin = exe
	} else {
		prefix = []string{"agent"}
	}
	idle := 10 * time.Second
	if testing.Short() {
		idle = 2 * time.Second
	}
	base := b.TempDir()
	start := func(name string, join ...string) (*exec.Cmd, *api.Info, time.Duration) {
		dir := filepath.Join(base, name)
		args := append(prefix, "-name", name, "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-data-dir", dir, "-gossip-profile", "local", "-insecure-api")
		for _, j := range join {
			args = append(args, "-join", j)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), execEnv+"=1")
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		for {
			if info, err := api.ReadInfo(dir); err == nil && info.PID == cmd.Process.Pid {
				if _, err := api.NewClient(info.API).Health(context.Background()); err == nil {
					return cmd, info, time.Since(t0)
				}
			}
			if time.Since(t0) > 20*time.Second {
				cmd.Process.Kill()
				b.Fatal("agent not ready")
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	stop := func(cmd *exec.Cmd) {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	seed, seedInfo, _ := start("seed")
	defer stop(seed)
	var ready time.Duration
	var rss int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd, _, d := start("n"+strconv.Itoa(i), seedInfo.Gossip)
		ready += d
		time.Sleep(idle)
		r, err := rssKiB(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		rss += r
		stop(cmd)
	}
	b.StopTimer()
	b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ms-to-ready")
	b.ReportMetric(float64(rss)/1024/float64(b.N), "MiB-RSS")
}
