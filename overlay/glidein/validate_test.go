package glidein

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/hostinfo"
	"github.com/pond-htc/pond/overlay/api"
)

func TestParseChecks(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int    // checks read
		wantErr string // part of the error
	}{
		{name: "every type", in: `[{"type":"disk","min_mb":1},{"type":"memory","min_mb":2},{"type":"cpus","min":1},
			{"type":"arch","allow":["X86_64","arm64"]},{"type":"os","allow":["linux"]},{"type":"central_manager","timeout":"5s"},
			{"type":"command","name":"ok","command":["/bin/true"]},{"type":"command","shell":"exit 0","timeout":"30"}]`, want: 8},
		{name: "empty list", in: `[]`, want: 0},
		{name: "null", in: `null`, wantErr: "found null"},
		{name: "not a list", in: `{"type":"disk"}`, wantErr: "want a JSON list of checks"},
		{name: "two lists", in: `[] []`, wantErr: "found more after it"},
		{name: "unknown field", in: `[{"type":"disk","min_mb":1,"size":3}]`, wantErr: `unknown field "size"`},
		{name: "no type", in: `[{"min_mb":1}]`, wantErr: "check 1 (): type: missing"},
		{name: "unknown type", in: `[{"type":"gpu"}]`, wantErr: `check 1 (gpu): type "gpu": want disk, memory`},
		{name: "disk without size", in: `[{"type":"disk"}]`, wantErr: "check 1 (disk): min_mb: want a number of MiB of at least 1"},
		{name: "negative memory", in: `[{"type":"cpus","min":1},{"type":"memory","min_mb":-5}]`, wantErr: "check 2 (memory): min_mb"},
		{name: "field of another type", in: `[{"type":"cpus","min":1,"min_mb":3}]`, wantErr: "min_mb: not a field of a cpus check"},
		{name: "arch without names", in: `[{"type":"arch"}]`, wantErr: "check 1 (arch): allow"},
		{name: "arch with an empty name", in: `[{"type":"arch","allow":[""]}]`, wantErr: "none empty"},
		{name: "command and shell", in: `[{"type":"command","name":"x","command":["a"],"shell":"b"}]`, wantErr: "check 1 (x): command: give either"},
		{name: "neither command nor shell", in: `[{"type":"command"}]`, wantErr: "give either"},
		{name: "empty program", in: `[{"type":"command","command":[""]}]`, wantErr: "the program is empty"},
		{name: "bad timeout", in: `[{"type":"command","shell":"true","timeout":"soon"}]`, wantErr: `timeout "soon": want a duration`},
		{name: "zero timeout", in: `[{"type":"central_manager","timeout":"0s"}]`, wantErr: "must be more than zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := api.ParseValidationChecks([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got) != tt.want {
				t.Fatalf("%d checks, %v; want %d", len(got), err, tt.want)
			}
		})
	}
}

func FuzzParseChecks(f *testing.F) {
	for _, s := range []string{`[]`, `[{"type":"disk","min_mb":1}]`, `[{"type":"command","shell":"true","timeout":"1s"}]`,
		`[{"type":"arch","allow":["x"]}]`, `null`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		checks, err := api.ParseValidationChecks([]byte(in))
		if err != nil {
			return
		}
		for _, c := range checks {
			if c.Validate() != nil {
				t.Fatalf("accepted an invalid check %+v", c)
			}
			if c.Label() == "" {
				t.Fatalf("check %+v has no name", c)
			}
		}
	})
}

// TestValidate runs real checks on this machine: what passes, what fails
// and the reason it gives (a failed command's output, a timeout that kills
// the command's children too, an unreachable central manager).
func TestValidate(t *testing.T) {
	dir := t.TempDir()
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	unreachable := func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", closed)
		if err == nil {
			c.Close()
		}
		return err
	}
	calls := 0
	answersLate := func(ctx context.Context) error {
		if calls++; calls < 2 {
			return errors.New("not yet")
		}
		return nil
	}
	// A central manager of another pool answers at once, every time.
	otherPool := func(ctx context.Context) error {
		return &OtherPoolError{Addr: "cm:9618", Name: "cm", Pool: "campus", Want: "other"}
	}
	// A central manager that refuses the first call and never answers the
	// next ones, which the timeout cuts short.
	refusedCalls := 0
	refusesThenHangs := func(ctx context.Context) error {
		if refusedCalls++; refusedCalls == 1 {
			return errors.New("401: token not accepted")
		}
		<-ctx.Done()
		return ctx.Err()
	}
	other := "X86_64"
	if hostinfo.Arch() == "X86_64" {
		other = "aarch64"
	}
	tests := []struct {
		name       string
		check      api.ValidationCheck
		cm         func(context.Context) error
		wantOK     bool
		wantDetail string
		maxTook    time.Duration
	}{
		{name: "disk", check: api.ValidationCheck{Type: api.CheckDisk, MinMB: 1}, wantOK: true, wantDetail: "MiB free in " + dir},
		{name: "disk too small", check: api.ValidationCheck{Type: api.CheckDisk, MinMB: 1 << 40}, wantDetail: "want at least 1099511627776"},
		{name: "memory", check: api.ValidationCheck{Type: api.CheckMemory, MinMB: 1}, wantOK: true, wantDetail: "MiB of memory available"},
		{name: "memory too small", check: api.ValidationCheck{Type: api.CheckMemory, MinMB: 1 << 40}, wantDetail: "want at least"},
		{name: "cpus", check: api.ValidationCheck{Type: api.CheckCPUs, Min: 1}, wantOK: true, wantDetail: fmt.Sprintf("%d CPUs", runtime.NumCPU())},
		{name: "too few cpus", check: api.ValidationCheck{Type: api.CheckCPUs, Min: 100000}, wantDetail: "want at least 100000"},
		{name: "arch by HTCondor's name", check: api.ValidationCheck{Type: api.CheckArch, Allow: []string{strings.ToLower(hostinfo.Arch())}}, wantOK: true},
		{name: "arch by Go's name", check: api.ValidationCheck{Type: api.CheckArch, Allow: []string{other, runtime.GOARCH}}, wantOK: true},
		{name: "other arch", check: api.ValidationCheck{Type: api.CheckArch, Allow: []string{other}}, wantDetail: "architecture " + hostinfo.Arch() + ", want one of " + other},
		{name: "os", check: api.ValidationCheck{Type: api.CheckOS, Allow: []string{runtime.GOOS}}, wantOK: true, wantDetail: "operating system " + hostinfo.OpSys()},
		{name: "other os", check: api.ValidationCheck{Type: api.CheckOS, Allow: []string{"WINDOWS", "plan9"}}, wantDetail: "want one of WINDOWS, plan9"},
		{name: "command", check: api.ValidationCheck{Type: api.CheckCommand, Command: []string{"/bin/sh", "-c", `echo "in $PWD as $POND_GLIDEIN_ID"`}}, wantOK: true,
			wantDetail: "in " + dir + " as pond-g1"},
		{name: "failing command", check: api.ValidationCheck{Type: api.CheckCommand, Name: "cvmfs", Shell: "echo no /cvmfs here >&2; exit 4"},
			wantDetail: "exit status 4: no /cvmfs here"},
		{name: "missing program", check: api.ValidationCheck{Type: api.CheckCommand, Command: []string{filepath.Join(dir, "nothing")}}, wantDetail: "no such file"},
		{name: "command past its timeout", check: api.ValidationCheck{Type: api.CheckCommand, Shell: "echo started; sleep 60 & sleep 60", Timeout: "300ms"},
			wantDetail: "did not end within 300ms: started", maxTook: 5 * time.Second},
		{name: "long output keeps its end", check: api.ValidationCheck{Type: api.CheckCommand, Shell: "seq 1 5000; exit 1"}, wantDetail: "exit status 1: ..."},
		{name: "central manager", check: api.ValidationCheck{Type: api.CheckCentralManager}, cm: answersLate, wantOK: true, wantDetail: "answered"},
		{name: "central manager unreachable", check: api.ValidationCheck{Type: api.CheckCentralManager, Timeout: "1500ms"}, cm: unreachable,
			wantDetail: "no answer in 1.5s", maxTook: 5 * time.Second},
		{name: "central manager of another pool", check: api.ValidationCheck{Type: api.CheckCentralManager, Timeout: "20s"}, cm: otherPool,
			wantDetail: `central manager cm:9618: the agent there (cm) belongs to pool "campus", not "other"`, maxTook: 5 * time.Second},
		{name: "central manager cut short", check: api.ValidationCheck{Type: api.CheckCentralManager, Timeout: "1500ms"}, cm: refusesThenHangs,
			wantDetail: "no answer in 1.5s (2 tries): 401: token not accepted", maxTook: 5 * time.Second},
		{name: "no central manager", check: api.ValidationCheck{Type: api.CheckCentralManager}, wantDetail: "no central manager to reach"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.check.Validate(); err != nil {
				t.Fatalf("the test's check is invalid: %v", err)
			}
			began := time.Now()
			res, err := Validate(context.Background(), []api.ValidationCheck{tt.check}, Env{ID: "pond-g1", DataDir: dir, CentralManager: tt.cm})
			took := time.Since(began)
			if len(res) != 1 {
				t.Fatalf("%d results", len(res))
			}
			if res[0].OK != tt.wantOK || !strings.Contains(res[0].Detail, tt.wantDetail) {
				t.Fatalf("result %+v, want ok %v and a detail containing %q", res[0], tt.wantOK, tt.wantDetail)
			}
			var ve *ValidationError
			if tt.wantOK != (err == nil) || !tt.wantOK && (!errors.As(err, &ve) || !strings.Contains(err.Error(), "check "+res[0].Name+": ")) {
				t.Fatalf("error %v for result %+v", err, res[0])
			}
			if tt.maxTook > 0 && took > tt.maxTook {
				t.Fatalf("took %s, more than %s", took, tt.maxTook)
			}
			if len(res[0].Detail) > maxOutput+200 {
				t.Fatalf("detail of %d bytes", len(res[0].Detail))
			}
		})
	}
}

// TestValidateRunsEveryCheck checks that a failed check does not stop the
// others, so that the reason lists everything that is wrong.
func TestValidateRunsEveryCheck(t *testing.T) {
	checks := []api.ValidationCheck{{Type: api.CheckDisk, MinMB: 1 << 40}, {Type: api.CheckCPUs, Min: 1}, {Type: api.CheckCommand, Name: "probe", Shell: "echo bad; exit 1"}}
	res, err := Validate(context.Background(), checks, Env{DataDir: t.TempDir()})
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Failed) != 2 || len(res) != 3 || !res[1].OK {
		t.Fatalf("results %+v, error %v; want disk and probe failed, cpus passed", res, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "check disk: ") || !strings.Contains(msg, "check probe: exit status 1: bad") {
		t.Fatalf("error %q does not name both failed checks", msg)
	}
}

func TestParseEndTime(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{in: "2026-11-25T08:00:00Z", want: time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)},
		{in: "2026-11-25T09:00:00+01:00", want: time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)},
		{in: " 1795593600 ", want: time.Unix(1795593600, 0).UTC()},
		{in: "", wantErr: true},
		{in: "2026-11-25T08:00:00", wantErr: true}, // no zone
		{in: "0001-01-01T00:00:00Z", wantErr: true},
		{in: "1969-12-31T23:59:59Z", wantErr: true},
		{in: "tomorrow", wantErr: true},
		{in: "0", wantErr: true},
		{in: "-5", wantErr: true},
		{in: "99999999999999", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseEndTime(tt.in)
		if (err != nil) != tt.wantErr || !got.Equal(tt.want) {
			t.Errorf("ParseEndTime(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseEndTime(f *testing.F) {
	for _, s := range []string{"2026-11-25T08:00:00Z", "1795593600", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseEndTime(in)
		if err == nil && (got.Unix() <= 0 || got.Location() != time.UTC || got.Year() > 9999) {
			t.Fatalf("ParseEndTime(%q) = %v", in, got)
		}
	})
}

func TestEnd(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		lifetime   time.Duration
		endTime    time.Time
		want       time.Time
		wantReason string
		wantGrace  time.Duration
	}{
		{name: "none"},
		{name: "lifetime", lifetime: time.Hour, want: t0.Add(time.Hour), wantReason: ReasonLifetime, wantGrace: 5 * time.Minute},
		{name: "short lifetime", lifetime: 30 * time.Second, want: t0.Add(30 * time.Second), wantReason: ReasonLifetime, wantGrace: 3 * time.Second},
		{name: "end time", endTime: t0.Add(20 * time.Minute), want: t0.Add(20 * time.Minute), wantReason: ReasonEndTime, wantGrace: 2 * time.Minute},
		{name: "end time sooner", lifetime: time.Hour, endTime: t0.Add(time.Minute), want: t0.Add(time.Minute), wantReason: ReasonEndTime, wantGrace: 6 * time.Second},
		{name: "lifetime sooner", lifetime: time.Minute, endTime: t0.Add(time.Hour), want: t0.Add(time.Minute), wantReason: ReasonLifetime, wantGrace: 6 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := End(t0, tt.lifetime, tt.endTime)
			if !got.Equal(tt.want) || why != tt.wantReason {
				t.Fatalf("End = %v %q, want %v %q", got, why, tt.want, tt.wantReason)
			}
			if g := DefaultGrace(t0, got); g != tt.wantGrace {
				t.Fatalf("DefaultGrace = %s, want %s", g, tt.wantGrace)
			}
		})
	}
}

// TestStatusFile checks that a runtime writes its status file from the
// start, that a failed validation leaves phase failed with reason
// validation, the failed check and the exit code, and that ReadStatus
// reads it back.
func TestStatusFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", StatusFile)
	rt, err := NewRuntime(Config{ID: "pond-g1", Name: "g1", StatusFile: path, Started: time.Now().UTC(), IdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(path)
	if err != nil || st.Phase != PhaseValidating || st.ID != "pond-g1" || st.PID != os.Getpid() || st.IdleTimeout != time.Minute {
		t.Fatalf("status %+v, %v", st, err)
	}
	err = rt.Validate(context.Background(), []api.ValidationCheck{{Type: api.CheckCommand, Name: "site", Shell: "echo no scratch; exit 2"}}, Env{DataDir: t.TempDir()})
	if _, ok := errors.AsType[*ValidationError](err); !ok {
		t.Fatalf("Validate = %v", err)
	}
	st, err = ReadStatus(path)
	if err != nil {
		t.Fatal(err)
	}
	want := api.GlideinCheck{Name: "site", Detail: "exit status 2: no scratch"}
	if st.Phase != PhaseFailed || st.Reason != ReasonValidation || st.ExitCode == nil || *st.ExitCode != ExitValidation ||
		!strings.Contains(st.Message, "check site: exit status 2: no scratch") || len(st.Checks) != 1 ||
		st.Checks[0].Name != want.Name || st.Checks[0].Detail != want.Detail || st.Checks[0].OK {
		t.Fatalf("status %+v", st)
	}
	if _, err := ReadStatus(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadStatus of no file: %v", err)
	}
}
