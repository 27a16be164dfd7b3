package daemon_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/wire"
)

// releasingProxy is a proxy in front of a startd that has the startd
// release the claim of the first activation it sees just before passing
// the activation on, as a startd that took an idle claim for forgotten
// does: the startd refuses it (unknown claim id). It answers the next
// activations late, once their job (which ends at once) has ended and
// reported.
type releasingProxy struct {
	proxy   *httputil.ReverseProxy
	release func(claimID string) error
	late    time.Duration
	mu      sync.Mutex
	// answers are the startd's answers to the activations, in order.
	answers []int
}

func (p *releasingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "startd/activate") {
		p.proxy.ServeHTTP(w, r)
		return
	}
	var req wire.ActivateRequest
	if _, err := peekJSON(r, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	first := len(p.answers) == 0
	p.mu.Unlock()
	if first {
		if err := p.release(req.ClaimID); err != nil {
			http.Error(w, "releasing the claim: "+err.Error(), http.StatusBadGateway)
			return
		}
	}
	rec := httptest.NewRecorder()
	p.proxy.ServeHTTP(rec, r)
	p.mu.Lock()
	p.answers = append(p.answers, rec.Code)
	p.mu.Unlock()
	if !first {
		time.Sleep(p.late)
	}
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// TestRefusedActivationLogsNoExecute runs a job whose first activation
// the startd refuses (it released the claim just before). The job goes
// back to the queue, runs on another claim and ends: its log has the
// refusal's shadow exception, and one Execute event, of the run that
// happened, before its end, although that run's activation was answered
// after the job had ended. A refused activation logs no Execute event.
func TestRefusedActivationLogsNoExecute(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("answers an activation seconds late")
	}
	p := &releasingProxy{late: 2 * time.Second}
	cm, _ := proxiedExec(t, func(target *url.URL, exec *testpool.Node) http.Handler {
		startd := exec.Client().Startd()
		p.proxy = httputil.NewSingleHostReverseProxy(target)
		p.release = func(id string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return startd.Release(ctx, &wire.ReleaseRequest{ClaimID: id})
		}
		return p
	})

	sc := cm.Client().Schedd()
	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	submitText(t, sc, jobDir, jobOwner(t), "executable = /bin/true\nlog = job.log\nqueue\n")
	waitQueueEmpty(t, sc, jobDir)
	evs := jobLogEvents(t, jobDir)
	var got []joblog.EventType
	for _, ev := range evs {
		if ev.Type != joblog.FileTransfer && ev.Type != joblog.ImageSize {
			got = append(got, ev.Type)
		}
	}
	want := []joblog.EventType{joblog.Submit, joblog.ShadowException, joblog.Execute, joblog.Terminated}
	if !slices.Equal(got, want) {
		t.Errorf("the job's events (but file transfers and image sizes) are %v, want %v", got, want)
	}
	for _, ev := range evs {
		if ev.Type == joblog.ShadowException && !strings.Contains(ev.Message, "REFUSED") {
			t.Errorf("the shadow exception is not the refusal: %q", ev.Message)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.answers) != 2 || p.answers[0] != http.StatusNotFound || p.answers[1] != http.StatusOK {
		t.Errorf("the startd answered the activations %v, want a refusal (404) then an acceptance", p.answers)
	}
}
