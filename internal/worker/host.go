package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// HostConfig is what a Host needs: the flags that llm-worker and
// sd-worker share.
type HostConfig struct {
	Name            string // the command, "llm-worker" or "sd-worker": default worker ids
	Host            string // the address to listen on
	Port            int    // 0: any free port
	WorkerID        string // empty: <Name>-<hostname>-<port>
	Model           string // the model reference
	Device          string // the -device flag's value, until SetDevice
	HiveURL         string // heartbeats go there (HeartbeatURL's form); empty: none
	HeartbeatEvery  time.Duration
	ShutdownTimeout time.Duration // how long the drain lets requests finish
	Token           string        // LLORCH_API_TOKEN: only logged about here
	Version         string
	Log             *slog.Logger
	LogHandler      slog.Handler   // net/http's own messages go there at debug level
	Load            func() Load    // the figures heartbeats carry; nil: none
	OnListen        func(net.Addr) // tests learn the port here
	SignalsHandled  func()         // called once the drain begins: a second signal then kills
}

// Load is a worker's load as heartbeats report it.
type Load struct {
	Running int     `json:"running"`
	Waiting int     `json:"waiting"`
	Rate    float64 `json:"rate,omitempty"` // tokens/s or images/min: the worker's unit
	Unit    string  `json:"rate_unit,omitempty"`
}

// Host is a worker's network side: it listens and serves a handler from
// the start (while the model loads, the Gate answers), beats to the hive
// when there is one, and drains at the end.
type Host struct {
	cfg      HostConfig
	gate     *Gate
	ln       net.Listener
	hs       *http.Server
	serveErr chan error
	device   atomic.Value // string, for heartbeats
	hb       *Heartbeat
	stopHB   context.CancelFunc
	cancel   context.CancelFunc // of the requests' base context
	port     int
}

// Listen opens the listener and serves handler, then starts the
// heartbeats.
func Listen(cfg HostConfig, gate *Gate, handler http.Handler) (*Host, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, fmt.Errorf("cannot listen: %w", err)
	}
	h := &Host{cfg: cfg, gate: gate, ln: ln, serveErr: make(chan error, 1)}
	h.port = ln.Addr().(*net.TCPAddr).Port
	if h.cfg.WorkerID == "" {
		host, _ := os.Hostname()
		h.cfg.WorkerID = fmt.Sprintf("%s-%s-%d", cfg.Name, host, h.port)
	}
	log := cfg.Log
	// Requests live in baseCtx: cancelling it ends the handlers that the
	// drain has not ended (a body still arriving).
	baseCtx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	// No ReadTimeout: it would cut streams; ReadDeadline bounds each body.
	h.hs = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	if cfg.LogHandler != nil {
		h.hs.ErrorLog = slog.NewLogLogger(cfg.LogHandler, slog.LevelDebug)
	}
	go func() { h.serveErr <- h.hs.Serve(ln) }()
	if cfg.OnListen != nil {
		cfg.OnListen(ln.Addr())
	}
	auth := "bearer token (LLORCH_API_TOKEN)"
	if cfg.Token == "" {
		auth = "none"
		if ip := net.ParseIP(cfg.Host); ip == nil || !ip.IsLoopback() {
			log.Warn("LLORCH_API_TOKEN is not set: anyone who reaches this port can use the model")
		}
	}
	log.Info("listening", "addr", ln.Addr().String(), "worker_id", h.cfg.WorkerID, "model", cfg.Model, "auth", auth, "version", cfg.Version)
	h.device.Store(HiveDevice(cfg.Device))
	hbCtx, stop := context.WithCancel(context.Background())
	h.stopHB = stop
	if cfg.HiveURL != "" {
		h.hb = &Heartbeat{URL: cfg.HiveURL, Interval: cfg.HeartbeatEvery, Logger: log, Payload: h.payload}
		h.hb.Start(hbCtx)
		log.Info("heartbeats", "url", cfg.HiveURL, "every", cfg.HeartbeatEvery)
	}
	return h, nil
}

// payload is the heartbeat now.
func (h *Host) payload() HeartbeatPayload {
	p := HeartbeatPayload{WorkerID: h.cfg.WorkerID, Model: h.cfg.Model, Device: h.device.Load().(string), Port: h.port,
		Status: h.gate.State().String(), Error: h.gate.Reason(), Implementation: Implementation, Version: h.cfg.Version}
	if h.cfg.Load != nil {
		l := h.cfg.Load()
		p.Load = &l
	}
	return p
}

// Addr is the address the host listens on.
func (h *Host) Addr() net.Addr { return h.ln.Addr() }

// WorkerID is the worker's id in heartbeats.
func (h *Host) WorkerID() string { return h.cfg.WorkerID }

// SetDevice names the device the model loaded on (a candle device name,
// "hip:N" or "cpu"), for heartbeats.
func (h *Host) SetDevice(dev string) { h.device.Store(HiveDevice(dev)) }

// Changed sends a heartbeat now: the state changed.
func (h *Host) Changed() {
	if h.hb != nil {
		h.hb.Kick()
	}
}

// ServeErr receives the error that ended serving.
func (h *Host) ServeErr() <-chan error { return h.serveErr }

// Drain ends the worker: refuse new work (the listener stays open: new
// requests and probes get 503 "draining"), tell the hive, let what is
// under way finish within the shutdown timeout, then cut it; then close
// the listener and call closeModel (when not nil). It returns how many
// requests it cut.
func (h *Host) Drain(closeModel func() error) int {
	log := h.cfg.Log
	if h.cfg.SignalsHandled != nil {
		h.cfg.SignalsHandled()
	}
	h.gate.Drain()
	if h.hb != nil {
		h.stopHB()
		h.hb.Wait()
		bctx, cancel := context.WithTimeout(context.Background(), lastBeatTimeout)
		if err := h.hb.Beat(bctx); err != nil {
			log.Warn("last heartbeat failed", "err", err)
		}
		cancel()
	}
	log.Info("shutting down: finishing the requests under way", "in_flight", h.gate.InFlight(), "timeout", h.cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), h.cfg.ShutdownTimeout)
	cut := h.gate.Shutdown(sctx)
	cancel()
	if cut > 0 {
		log.Warn("shutdown timeout: the requests under way were cut", "cut", cut)
	}
	sctx, cancel = context.WithTimeout(context.Background(), closeGrace)
	if h.hs.Shutdown(sctx) != nil {
		h.cancel()
		h.hs.Close()
	}
	cancel()
	h.cancel()
	if closeModel != nil {
		if err := closeModel(); err != nil {
			log.Warn("closing the model", "err", err)
		}
	}
	log.Info("stopped", "cut", cut)
	return cut
}

// ExitCut is the exit status of a shutdown that cut requests: a
// supervisor can tell it from a clean one (0) and from a failure (1).
const ExitCut = 3

// closeGrace bounds, once the requests have ended, the ones still
// arriving when the listener closes.
const closeGrace = 5 * time.Second

// lastBeatTimeout bounds the "draining" beat: a hive that hangs does
// not hold the shutdown.
const lastBeatTimeout = 2 * time.Second

// ResolveDevice merges -device and -rocm-device into "auto", "cpu" or
// "hip:N".
func ResolveDevice(device string, deviceSet bool, rocm int, rocmSet bool) (string, error) {
	d := strings.ToLower(strings.TrimSpace(device))
	switch {
	case d == "auto" || d == "cpu":
	case strings.HasPrefix(d, "hip:") || strings.HasPrefix(d, "rocm:"):
		_, num, _ := strings.Cut(d, ":")
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			return "", fmt.Errorf("-device %q: the GPU ordinal must be a number ≥ 0", device)
		}
		d = "hip:" + strconv.Itoa(n)
	default:
		return "", fmt.Errorf("-device %q: want auto, cpu or hip:N", device)
	}
	if !rocmSet {
		return d, nil
	}
	if rocm < 0 {
		return "", fmt.Errorf("-rocm-device %d: want a GPU ordinal ≥ 0", rocm)
	}
	r := "hip:" + strconv.Itoa(rocm)
	if deviceSet && d != r {
		return "", fmt.Errorf("-rocm-device %d and -device %s disagree: give one of them", rocm, device)
	}
	return r, nil
}
