package tree

import (
	"fmt"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/ring"
)

// LocalNetwork connects engines in one process without sockets, each
// message on its own goroutine after an optional delay. It suits unit
// tests of code that hosts an Engine.
type LocalNetwork struct {
	mu       sync.RWMutex
	handlers map[string]Handler
	// Latency, if set, gives the one-way delay of each message.
	Latency func(from, to string) time.Duration
}

// NewLocalNetwork returns an empty network.
func NewLocalNetwork() *LocalNetwork { return &LocalNetwork{handlers: map[string]Handler{}} }

// Register attaches the handler of node name.
func (n *LocalNetwork) Register(name string, h Handler) {
	n.mu.Lock()
	n.handlers[name] = h
	n.mu.Unlock()
}

// Unregister detaches node name; messages to it then fail.
func (n *LocalNetwork) Unregister(name string) {
	n.mu.Lock()
	delete(n.handlers, name)
	n.mu.Unlock()
}

// Transport returns the transport node from sends with.
func (n *LocalNetwork) Transport(from string) Transport { return localTransport{n, from} }

type localTransport struct {
	n    *LocalNetwork
	from string
}

func (t localTransport) delay(from, to string) {
	if t.n.Latency != nil {
		if d := t.n.Latency(from, to); d > 0 {
			time.Sleep(d)
		}
	}
}

// Send implements Transport.
func (t localTransport) Send(to ring.Member, req *Request, reply func(*Response, error)) {
	go func() {
		t.delay(t.from, to.Name)
		t.n.mu.RLock()
		h := t.n.handlers[to.Name]
		t.n.mu.RUnlock()
		if h == nil {
			reply(nil, fmt.Errorf("local network: %s is not reachable", to.Name))
			return
		}
		var once sync.Once
		h.Serve(req, func(resp *Response) {
			once.Do(func() {
				go func() {
					t.delay(to.Name, t.from)
					reply(resp, nil)
				}()
			})
		})
	}()
}
