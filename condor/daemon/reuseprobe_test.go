package daemon_test

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/wire"
)

// slowReactivations is a proxy in front of a startd that holds each
// activation of a claim that already ran a job for longer than the claim
// lease and a renewal interval, as a schedd whose queue is busy takes that
// long between a job's end and the start of the claim's next job; and
// that answers a claim's first activation late, once its job (which ends
// at once) has ended and the claim gone on to its next.
type slowReactivations struct {
	proxy *httputil.ReverseProxy
	hold  time.Duration
	late  time.Duration
	mu    sync.Mutex
	// claims counts the activations of each claim.
	claims map[string]int
	// held counts the activations held.
	held int
}

func (p *slowReactivations) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "startd/activate") {
		var req wire.ActivateRequest
		if _, err := peekJSON(r, &req); err == nil {
			p.mu.Lock()
			p.claims[req.ClaimID]++
			again := p.claims[req.ClaimID] > 1
			if again {
				p.held++
			}
			p.mu.Unlock()
			if again {
				time.Sleep(p.hold)
			} else {
				rec := httptest.NewRecorder()
				p.proxy.ServeHTTP(rec, r)
				time.Sleep(p.late)
				maps.Copy(w.Header(), rec.Header())
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
				return
			}
		}
	}
	p.proxy.ServeHTTP(w, r)
}

// TestReusedClaimNotProbedBeforeItsActivation runs jobs one after the
// other on one claim whose next job takes longer to start than the claim
// lease (3 s), as on a schedd whose queue is busy, and whose first
// job's activation is answered after that job ended and the next started
// on the claim. The claim heard of last when the previous job ended, or
// when the previous job's activation returned, is not a silent job's: the schedd
// neither asks the startd about the next job before it is activated (the
// startd, still on the previous one, would say it does not run it) nor
// requeues that job and releases the claim under its activation. Every
// job starts once and ends once, none refused, none left running.
func TestReusedClaimNotProbedBeforeItsActivation(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("holds each job's start for seconds")
	}
	// The startd is reached through the proxy: it advertises the
	// proxy's address.
	p := &slowReactivations{hold: 6 * time.Second, late: 2 * time.Second, claims: map[string]int{}}
	cm, _ := proxiedExec(t, func(target *url.URL, _ *testpool.Node) http.Handler {
		p.proxy = httputil.NewSingleHostReverseProxy(target)
		return p
	})

	sc := cm.Client().Schedd()
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	const jobs = 3
	submitText(t, sc, jobDir, jobOwner(t), "executable = /bin/true\nlog = job.log\nqueue 3\n")
	waitQueueEmpty(t, sc, jobDir)
	evs := jobLogEvents(t, jobDir)
	type counts struct{ execute, terminated, other int }
	per := map[int]*counts{}
	for _, ev := range evs {
		c := per[ev.Proc]
		if c == nil {
			c = &counts{}
			per[ev.Proc] = c
		}
		switch ev.Type {
		case joblog.Submit, joblog.FileTransfer, joblog.ImageSize:
		case joblog.Execute:
			c.execute++
		case joblog.Terminated:
			c.terminated++
		default:
			c.other++
			t.Errorf("job %d: %s event (%s)", ev.Proc, ev.Type, ev.Message)
		}
	}
	for proc := range jobs {
		if c := per[proc]; c == nil || c.execute != 1 || c.terminated != 1 {
			t.Errorf("job %d: %+v, want one execute and one terminated event", proc, c)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == 0 {
		t.Errorf("no claim ran a second job: nothing was held (activations by claim: %v)", p.claims)
	}
}
