package ec2test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Machines stands for the machines moto does not run: each instance's
// real user data runs as a local shell script, with the instance's role
// (moto's test credentials and endpoint) in its environment and a
// shutdown command that only ends the script; the instance is terminated
// in moto when its script ends (InstanceInitiatedShutdownBehavior
// terminate), and the script is killed when moto says the instance is
// terminated. Create it with NewMachines; every script is killed when the
// test ends.
type Machines struct {
	// Env, when set, gives more environment for the script of the
	// instance with this ID, such as the endpoint of its metadata
	// service (AWS_EC2_METADATA_SERVICE_ENDPOINT). Set it before Boot.
	Env func(instanceID string) []string
	// Limit, when more than zero, is the most instances booted: the
	// others stay launched with no machine, for a benchmark of many.
	Limit int

	t        testing.TB
	client   *ec2.Client
	endpoint string
	bin      string // holds a shutdown that does nothing

	mu      sync.Mutex
	running map[string]*exec.Cmd // by instance ID
	ended   map[string]bool
	logs    map[string]*logBuffer
}

// NewMachines returns the machines of moto at endpoint (StartMoto).
func NewMachines(t testing.TB, endpoint string) *Machines {
	t.Helper()
	ac, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(Region), config.WithBaseEndpoint(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "shutdown"), []byte("#!/bin/sh\necho \"shutdown $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := &Machines{t: t, client: ec2.NewFromConfig(ac), endpoint: endpoint, bin: bin,
		running: map[string]*exec.Cmd{}, ended: map[string]bool{}, logs: map[string]*logBuffer{}}
	t.Cleanup(m.stopAll)
	return m
}

// Boot runs the user data of every instance that is not terminated and
// not yet booted.
func (m *Machines) Boot(ctx context.Context) error {
	m.mu.Lock()
	full := m.Limit > 0 && len(m.running) >= m.Limit
	m.mu.Unlock()
	if full {
		// Nothing to boot: no need to ask moto, whose answer costs a
		// scan of every instance (the benchmarks launch 200).
		return nil
	}
	out, err := m.client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	if err != nil {
		return err
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			id := aws.ToString(in.InstanceId)
			m.mu.Lock()
			_, have := m.running[id]
			full := m.Limit > 0 && len(m.running) >= m.Limit
			m.mu.Unlock()
			if full {
				return nil
			}
			if have || in.State.Name == types.InstanceStateNameTerminated || in.State.Name == types.InstanceStateNameShuttingDown {
				continue
			}
			if err := m.boot(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *Machines) boot(ctx context.Context, id string) error {
	attr, err := m.client.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{
		InstanceId: aws.String(id), Attribute: types.InstanceAttributeNameUserData})
	if err != nil {
		return err
	}
	ud, err := base64.StdEncoding.DecodeString(aws.ToString(attr.UserData.Value))
	if err != nil {
		return fmt.Errorf("the user data of %s: %w", id, err)
	}
	cmd := exec.Command("sh", "-c", string(ud))
	cmd.Env = append(os.Environ(), "PATH="+m.bin+":"+os.Getenv("PATH"), "AWS_ENDPOINT_URL="+m.endpoint, "POND_TEST_INSTANCE_ID="+id)
	if m.Env != nil {
		cmd.Env = append(cmd.Env, m.Env(id)...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := &logBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	m.mu.Lock()
	m.running[id], m.logs[id] = cmd, log
	m.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		m.mu.Lock()
		m.ended[id] = true
		m.mu.Unlock()
		// The instance shut itself down: EC2 terminates it.
		_, _ = m.client.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	}()
	return nil
}

// Reap kills the scripts of the instances moto says are terminated.
func (m *Machines) Reap(ctx context.Context) error {
	// Only the instances booted and still running their script.
	var ids []string
	m.mu.Lock()
	for id := range m.running {
		if !m.ended[id] {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	out, err := m.client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		return err
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if in.State.Name != types.InstanceStateNameTerminated && in.State.Name != types.InstanceStateNameShuttingDown {
				continue
			}
			m.mu.Lock()
			if cmd := m.running[aws.ToString(in.InstanceId)]; cmd != nil && cmd.Process != nil && !m.ended[aws.ToString(in.InstanceId)] {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
			m.mu.Unlock()
		}
	}
	return nil
}

// Run boots and reaps every interval until the test ends, so that the
// instances an apply launches (and replaces) come up by themselves.
func (m *Machines) Run(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_ = m.Boot(ctx)
			_ = m.Reap(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
	m.t.Cleanup(func() { cancel(); <-done })
}

// Running returns the IDs of the instances whose scripts run, sorted.
func (m *Machines) Running() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id := range m.running {
		if !m.ended[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Logs returns the last lines of each script's output, for a failed
// test's message.
func (m *Machines) Logs(lines int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.logs))
	for id := range m.logs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "\n%s:\n%s", id, lastLines(m.logs[id].String(), lines))
	}
	return b.String()
}

func (m *Machines) stopAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, cmd := range m.running {
		if cmd.Process != nil && !m.ended[id] {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

// logBuffer is a script's output, written by its process's copier and
// read by the test.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
