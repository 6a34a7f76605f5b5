package worker

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// State is a worker's place in its life, as heartbeats, /health and
// /ready report it.
type State int32

const (
	Loading  State = iota // the model loads; requests get 503 model_loading
	Ready                 // requests are served
	Draining              // shutting down: requests under way finish, new ones get 503 draining
	Failed                // the model could not be loaded or broke: requests get 503 failed
)

var stateNames = [...]string{Loading: "loading", Ready: "ready", Draining: "draining", Failed: "failed"}

func (s State) String() string { return stateNames[s] }

// ErrShutdown is the cause with which Gate.Shutdown cancels the requests
// it cuts.
var ErrShutdown = errors.New("the worker shut down")

// Gate is a worker's lifecycle: its state, the requests under way, and
// the context that the shutdown cancels to cut them.
type Gate struct {
	state    atomic.Int32
	inflight atomic.Int64
	cut      atomic.Int64
	stopping context.Context
	stop     context.CancelCauseFunc
	log      *slog.Logger

	mu     sync.Mutex
	reason string // why it failed
}

// NewGate is a gate in the Loading state.
func NewGate(log *slog.Logger) *Gate {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gate{log: log}
	g.stopping, g.stop = context.WithCancelCause(context.Background())
	return g
}

// State is the state now.
func (g *Gate) State() State { return State(g.state.Load()) }

// SetReady opens the gate, unless it drains already.
func (g *Gate) SetReady() { g.state.CompareAndSwap(int32(Loading), int32(Ready)) }

// SetFailed marks a worker whose model did not load (or broke), with why.
func (g *Gate) SetFailed(reason string) {
	g.mu.Lock()
	g.reason = reason
	g.mu.Unlock()
	g.state.Store(int32(Failed))
}

// Reason is why the worker failed, "" when it did not.
func (g *Gate) Reason() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reason
}

// Drain refuses new requests; the ones under way go on. A failed worker
// stays failed.
func (g *Gate) Drain() {
	g.state.CompareAndSwap(int32(Loading), int32(Draining))
	g.state.CompareAndSwap(int32(Ready), int32(Draining))
}

// Check is nil when the worker takes requests, else the 503 to send.
func (g *Gate) Check() *Error {
	switch g.State() {
	case Loading:
		return Unavailable("model_loading", "the model is still loading: try again shortly")
	case Draining:
		return Unavailable("draining", "the worker is shutting down: send the request to another worker")
	case Failed:
		return Unavailable("failed", "the worker could not load its model (%s): send the request to another worker", g.Reason())
	}
	return nil
}

// Enter counts a request under way until the returned func is called.
func (g *Gate) Enter() (leave func()) {
	g.inflight.Add(1)
	return func() { g.inflight.Add(-1) }
}

// InFlight is the number of requests under way.
func (g *Gate) InFlight() int64 { return g.inflight.Load() }

// Stopping is cancelled, with cause ErrShutdown, when Shutdown cuts the
// requests under way: each request's context should end with it.
func (g *Gate) Stopping() context.Context { return g.stopping }

// CountCut counts a request that the shutdown cut.
func (g *Gate) CountCut() { g.cut.Add(1) }

// Cut is how many requests the shutdown cut.
func (g *Gate) Cut() int { return int(g.cut.Load()) }

// Shutdown drains and waits for the requests under way to end, until ctx
// ends; then it cuts the rest (Stopping is cancelled) and waits, for at
// most CutGrace, for their answers to be written. It returns how many
// requests were cut (CountCut). The listener is not the gate's: it stays
// open, and new requests get a 503 meanwhile.
func (g *Gate) Shutdown(ctx context.Context) int {
	g.Drain()
	if !g.waitIdle(ctx) {
		g.stop(ErrShutdown)
		grace, cancel := context.WithTimeout(context.Background(), CutGrace)
		if !g.waitIdle(grace) {
			g.log.Warn("cut requests still writing their answers", "in_flight", g.inflight.Load())
		}
		cancel()
	}
	return g.Cut()
}

// CutGrace bounds the writing of cut answers (a client that stopped
// reading holds a write for up to its write timeout).
const CutGrace = 10 * time.Second

// waitIdle waits until no request is under way (true) or ctx ends.
func (g *Gate) waitIdle(ctx context.Context) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for g.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// ReadyHandler answers GET /ready: 200 when the worker takes requests, 503
// while it loads, drains or has failed; the state is in the body.
func (g *Gate) ReadyHandler(w http.ResponseWriter, r *http.Request) {
	g.probe(w, r, g.State() == Ready)
}

// LiveHandler answers GET /live: 200 while the process serves, whatever
// its state, which the body says.
func (g *Gate) LiveHandler(w http.ResponseWriter, r *http.Request) { g.probe(w, r, true) }

func (g *Gate) probe(w http.ResponseWriter, r *http.Request, ok bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		MethodNotAllowed(w, r, "GET, HEAD")
		return
	}
	status := http.StatusServiceUnavailable
	if ok {
		status = http.StatusOK
	}
	body := map[string]string{"status": g.State().String()}
	if reason := g.Reason(); reason != "" {
		body["error"] = reason
	}
	WriteJSON(w, status, body)
}

// Health is the start of a GET /health answer: the status code (200 when
// ready, else 503) and the body's common fields, which the worker adds to.
func (g *Gate) Health(model, version string) (int, map[string]any) {
	st := g.State()
	body := map[string]any{"status": st.String(), "model": model, "implementation": Implementation, "version": version}
	if reason := g.Reason(); reason != "" {
		body["error"] = reason
	}
	if st == Ready {
		return http.StatusOK, body
	}
	return http.StatusServiceUnavailable, body
}
