package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rocm-go/rocm/candle/models/sd"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/worker"
)

// ServerConfig is what the HTTP layer needs besides the backend.
type ServerConfig struct {
	ModelID      string        // the name clients use and /v1/models lists
	ModelPath    string        // the folder or file, for /sdapi/v1/sd-models
	Version      string        // the worker's version
	APIToken     string        // when set, every endpoint but the probes and /metrics wants it as a bearer token
	MaxBodyBytes int64         // the largest request body (init images and masks come in it)
	MaxSize      int           // the largest width or height, in pixels
	MaxSteps     int           // the most steps a request may ask
	MaxImages    int           // the most images one request may ask
	MaxBatch     int           // the most images in one UNet batch; 1: no batching across requests
	MaxQueue     int           // the most jobs waiting before 429
	ReadTimeout  time.Duration // the longest a request's body may take to arrive; 0: none
	WriteTimeout time.Duration // the longest one write to a client may block
	Logger       *slog.Logger
}

// Server is the image worker's HTTP API: OpenAI's images API,
// AUTOMATIC1111's, jobs with progress, and the probes.
type Server struct {
	cfg     ServerConfig
	log     *slog.Logger
	gate    *worker.Gate
	created int64
	handler http.Handler

	mu      sync.RWMutex
	backend Backend
	run     *runner
	stopRun context.CancelFunc
	runDone chan struct{}
	onEnd   func(*job)
	metrics *metrics
}

// NewServer makes the API in the loading state.
func NewServer(cfg ServerConfig) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 32 << 20
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = 2048
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 150
	}
	if cfg.MaxImages <= 0 {
		cfg.MaxImages = 8
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 8
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 32
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	log := slog.New(worker.RequestIDs(cfg.Logger.Handler()))
	s := &Server{cfg: cfg, log: log, gate: worker.NewGate(cfg.Logger), created: time.Now().Unix()}
	s.metrics = newMetrics(s)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.health)
	mux.HandleFunc("/ready", s.gate.ReadyHandler)
	mux.HandleFunc("/live", s.gate.LiveHandler)
	mux.Handle("/metrics", s.metrics.reg)
	mux.HandleFunc("/v1/models", s.models)
	mux.HandleFunc("/v1/images/generations", s.serving("POST", s.openAIGenerations))
	mux.HandleFunc("/v1/images/edits", s.serving("POST", s.openAIEdits))
	mux.HandleFunc("/v1/jobs/{id}", s.serving("GET, DELETE", s.jobEndpoint))
	mux.HandleFunc("/v1/jobs/{id}/events", s.serving("GET", s.jobEvents))
	mux.HandleFunc("/sdapi/v1/txt2img", s.serving("POST", s.a1111Txt2Img))
	mux.HandleFunc("/sdapi/v1/img2img", s.serving("POST", s.a1111Img2Img))
	mux.HandleFunc("/sdapi/v1/samplers", s.a1111Samplers)
	mux.HandleFunc("/sdapi/v1/sd-models", s.a1111Models)
	mux.HandleFunc("/sdapi/v1/progress", s.serving("GET", s.a1111Progress))
	mux.HandleFunc("/sdapi/v1/interrupt", s.serving("POST", s.a1111Interrupt))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		worker.WriteError(w, &worker.Error{Status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("no endpoint %s %s: this worker serves /v1/images/generations, /v1/images/edits, /v1/jobs/{id}, /sdapi/v1/txt2img, /sdapi/v1/img2img, /sdapi/v1/samplers, /sdapi/v1/sd-models, /sdapi/v1/progress, /sdapi/v1/interrupt, /v1/models, /metrics and the probes /health, /ready, /live", r.Method, r.URL.Path)})
	})
	s.handler = worker.Observe(s.log, s.metrics.reg, mux,
		worker.Recoverer(s.log, worker.ReadDeadline(cfg.ReadTimeout, worker.Auth(cfg.APIToken, "sd-worker", mux))))
	return s
}

// Handler is the API's handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Gate is the server's lifecycle.
func (s *Server) Gate() *worker.Gate { return s.gate }

// OnJobEnd sets what hears each job's end (the callback); call it before
// SetReady.
func (s *Server) OnJobEnd(f func(*job)) { s.onEnd = f }

// SetReady serves b: the runner starts and generation opens.
func (s *Server) SetReady(b Backend) {
	run := newRunner(b, s.cfg.MaxBatch, s.cfg.MaxQueue, s.log, s.metrics)
	run.onEnd = s.onEnd
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { run.run(ctx); close(done) }()
	s.mu.Lock()
	s.backend, s.run, s.stopRun, s.runDone = b, run, cancel, done
	s.mu.Unlock()
	s.gate.SetReady()
}

// StopRunner ends the runner once the jobs have drained (after the gate's
// shutdown): the jobs still queued end canceled.
func (s *Server) StopRunner() {
	s.mu.RLock()
	stop, done := s.stopRun, s.runDone
	s.mu.RUnlock()
	if stop != nil {
		stop()
		<-done
	}
}

// Load is the heartbeats' figures: jobs running and waiting, and images
// made per minute since the last beat.
func (s *Server) Load() worker.Load {
	_, run := s.loaded()
	if run == nil {
		return worker.Load{Unit: "images/min"}
	}
	w, r := run.counts()
	return worker.Load{Running: r, Waiting: w, Rate: 60 * run.rate.Rate(int64(s.metrics.images.Value())), Unit: "images/min"}
}

// loaded is the backend and its runner once the model has loaded, nils
// before.
func (s *Server) loaded() (Backend, *runner) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.backend, s.run
}

// counts is the jobs waiting and running, none before the model has
// loaded.
func (s *Server) counts() (waiting, running int) {
	if _, run := s.loaded(); run != nil {
		return run.counts()
	}
	return 0, 0
}

// serving is an endpoint of the methods allow names ("GET, DELETE") that
// needs the model: while it loads, drains or has failed, a 503 answers.
func (s *Server) serving(allow string, h func(http.ResponseWriter, *http.Request, Backend, *runner)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(", "+allow+", ", ", "+r.Method+", ") {
			worker.MethodNotAllowed(w, r, allow)
			return
		}
		b, run, aerr := s.current()
		if aerr != nil {
			worker.WriteError(w, aerr)
			return
		}
		h(w, r, b, run)
	}
}

// current is the backend and runner when the server is ready, else the
// error to send.
func (s *Server) current() (Backend, *runner, *worker.Error) {
	if aerr := s.gate.Check(); aerr != nil {
		return nil, nil, aerr
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.backend, s.run, nil
}

// health answers GET /health: the state, the model and the device.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		worker.MethodNotAllowed(w, r, "GET, HEAD")
		return
	}
	status, body := s.gate.Health(s.cfg.ModelID, s.cfg.Version)
	if b, run := s.loaded(); b != nil {
		info := b.Info()
		body["device"], body["dtype"], body["sd_version"], body["default_size"] = info.Device, info.DType, info.Version, info.DefaultSize
		wait, running := run.counts()
		body["running"], body["waiting"] = running, wait
		m := b.Memory()
		body["device_memory"] = map[string]int64{"in_use": m.InUse, "cached": m.Cached, "peak": m.Peak}
	}
	worker.WriteJSON(w, status, body)
}

// models answers GET /v1/models with the one model this worker serves.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		worker.MethodNotAllowed(w, r, "GET")
		return
	}
	worker.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{
		{"id": s.cfg.ModelID, "object": "model", "created": s.created, "owned_by": "rocm-go"}}})
}

// genRequest is a generation as the endpoints read it, before the checks.
type genRequest struct {
	jobID         string
	model         string
	prompt        string
	negative      string
	width, height int // 0: the model's size (or the init image's)
	steps         int // 0: the default
	guidance      *float64
	seed          *int64 // nil or negative: random
	sampler       string
	n             int
	init, mask    []byte // encoded images
	maskInvert    bool   // A1111's inpainting_mask_invert: black repaints
	maskAlpha     bool   // OpenAI's mask: the transparent pixels repaint
	strength      *float64
	preview       bool
	promptParam   string
	sizeParam     string
	guidanceParam string
	strengthParam string
	negativeParam string
	samplerParam  string
	countParam    string
	initParam     string
	maskParam     string
}

// defaultSteps is a request's steps when it gives none: 4 for turbo
// models, else 30.
func defaultSteps(info ModelInfo) int {
	if info.Version == "turbo" {
		return 4
	}
	return 30
}

// check turns a request into a job, or a 4xx that says what is wrong.
func (s *Server) check(b Backend, g *genRequest, ctx context.Context) (*job, *worker.Error) {
	info := b.Info()
	if g.model != "" && g.model != s.cfg.ModelID {
		return nil, &worker.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: worker.Str("model"), Code: worker.Str("model_not_found"),
			Message: fmt.Sprintf("the model %q is not served here: this worker serves %q", g.model, s.cfg.ModelID)}
	}
	if strings.TrimSpace(g.prompt) == "" && g.init == nil {
		return nil, worker.BadRequest(g.promptParam, "%s is missing or empty", g.promptParam)
	}
	var warnings []string
	for _, p := range []struct{ text, param string }{{g.prompt, g.promptParam}, {g.negative, g.negativeParam}} {
		n, err := b.PromptWindows(p.text)
		if err != nil {
			return nil, worker.BadRequest(p.param, "%s: %v", p.param, err)
		}
		if n > 1 {
			warnings = append(warnings, fmt.Sprintf("%s is longer than the text encoder's 77-token window: the rest (about %d more windows) was cut off, as diffusers does", p.param, n-1))
		}
	}
	if g.n == 0 {
		g.n = 1
	}
	if g.n < 1 || g.n > s.cfg.MaxImages {
		return nil, worker.BadRequest(g.countParam, "%s %d: want 1 to %d (the worker's -max-images)", g.countParam, g.n, s.cfg.MaxImages)
	}
	steps := g.steps
	if steps == 0 {
		steps = defaultSteps(info)
	}
	if steps < 1 || steps > s.cfg.MaxSteps {
		return nil, worker.BadRequest("steps", "steps %d: want 1 to %d (the worker's -max-steps)", steps, s.cfg.MaxSteps)
	}
	guidance := 7.5
	if info.Version == "turbo" {
		guidance = 0
	}
	if g.guidance != nil {
		guidance = *g.guidance
	}
	if guidance < 0 || guidance > 30 {
		return nil, worker.BadRequest(g.guidanceParam, "%s %g: want 0 to 30 (1 or less: no guidance)", g.guidanceParam, guidance)
	}
	if guidance <= 1 {
		guidance = 1 // the pipeline's "unguided"; 0 would mean its default
	}
	kind, err := parseSampler(g.sampler)
	if err != nil {
		return nil, worker.BadRequest(g.samplerParam, "%s: %v", g.samplerParam, err)
	}
	if kind == "" {
		kind, _ = parseSampler(info.DefaultSampler)
	}
	var seed uint64
	if g.seed == nil || *g.seed < 0 {
		seed = rand.Uint64N(1 << 32) // A1111's range, so that a client can write it back
	} else {
		seed = uint64(*g.seed)
	}
	req := sd.Request{Prompt: g.prompt, NegativePrompt: g.negative, Steps: steps, Sampler: kind, Guidance: guidance, Seed: seed, Batch: g.n}
	if g.preview {
		req.Preview = sd.PreviewApprox
	}
	if g.init != nil {
		img, aerr := decodeImage(g.init, g.initParam, s.cfg.MaxSize)
		if aerr != nil {
			return nil, aerr
		}
		if g.width == 0 && g.height == 0 {
			g.width, g.height = img.Bounds().Dx(), img.Bounds().Dy()
		}
		if aerr := s.checkSize(g, info); aerr != nil {
			return nil, aerr
		}
		req.Init = fitImage(img, g.width, g.height)
		strength := 0.75
		if g.mask != nil {
			strength = 1
		}
		if g.strength != nil {
			strength = *g.strength
		}
		if strength <= 0 || strength > 1 {
			return nil, worker.BadRequest(g.strengthParam, "%s %g: want more than 0 and at most 1", g.strengthParam, strength)
		}
		req.Strength = strength
		if g.mask != nil {
			m, aerr := decodeImage(g.mask, g.maskParam, s.cfg.MaxSize)
			if aerr != nil {
				return nil, aerr
			}
			req.Mask = maskImage(fitImage(m, g.width, g.height), g.maskAlpha, g.maskInvert)
		} else if info.Inpainting {
			return nil, worker.BadRequest(g.maskParam, "%s is missing: this model is an inpainting model, which needs a mask", g.maskParam)
		}
	} else {
		if g.mask != nil {
			return nil, worker.BadRequest(g.maskParam, "%s without an image to inpaint: give %s too", g.maskParam, g.initParam)
		}
		if info.Inpainting {
			return nil, worker.BadRequest(g.initParam, "this model is an inpainting model: send an image and a mask to /v1/images/edits or /sdapi/v1/img2img")
		}
		if g.width == 0 && g.height == 0 {
			g.width, g.height = info.DefaultSize, info.DefaultSize
		}
		if aerr := s.checkSize(g, info); aerr != nil {
			return nil, aerr
		}
	}
	req.Width, req.Height = g.width, g.height
	if err := b.Fits(req); err != nil {
		return nil, &worker.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Param: worker.Str(g.sizeParam), Code: worker.Str("too_large_for_device"),
			Message: fmt.Sprintf("the request would not fit in the device's memory: %v; ask for fewer images or a smaller size", err)}
	}
	id := g.jobID
	if id == "" {
		id = worker.NewID("img-")
	} else if len(id) > 128 || strings.ContainsAny(id, "/?#% \t\n") {
		return nil, worker.BadRequest("job_id", "the job id %q: want at most 128 characters, without /, ?, #, %% or spaces", id)
	}
	p := params{Prompt: g.prompt, NegativePrompt: g.negative, Steps: steps, Sampler: samplerName(kind), CFGScale: guidance, Seed: seed,
		Width: g.width, Height: g.height, Model: s.cfg.ModelID}
	if req.Init != nil {
		p.Strength = req.Strength
	}
	j := newJob(ctx, id, req, p)
	j.warnings = warnings
	return j, nil
}

// checkSize wants the size to be positive multiples of the model's step,
// within -max-size.
func (s *Server) checkSize(g *genRequest, info ModelInfo) *worker.Error {
	if g.width == 0 {
		g.width = g.height
	}
	if g.height == 0 {
		g.height = g.width
	}
	m := info.Multiple
	if g.width < m || g.height < m || g.width%m != 0 || g.height%m != 0 {
		return worker.BadRequest(g.sizeParam, "%s %dx%d: want multiples of %d (this model's step)", g.sizeParam, g.width, g.height, m)
	}
	if g.width > s.cfg.MaxSize || g.height > s.cfg.MaxSize {
		return worker.BadRequest(g.sizeParam, "%s %dx%d: at most %d pixels a side (the worker's -max-size)", g.sizeParam, g.width, g.height, s.cfg.MaxSize)
	}
	return nil
}

// runJob submits j and waits for its end. The job ends with the request:
// a client that goes away cancels it, and the shutdown cuts it. It
// returns the job's outcome as an error to send, nil when it is done.
func (s *Server) runJob(run *runner, j *job) *worker.Error {
	defer s.gate.Enter()()
	stop := context.AfterFunc(s.gate.Stopping(), func() { j.cancel(context.Cause(s.gate.Stopping())) })
	defer stop()
	if aerr := run.submit(j); aerr != nil {
		j.cancel(nil)
		return aerr
	}
	<-j.done
	_, err, st := j.result()
	switch {
	case st == jobDone:
		return nil
	case errors.Is(err, worker.ErrShutdown):
		s.gate.CountCut()
		return worker.Unavailable("shutdown", "the job was cut: the worker shut down before it ended; send the request to another worker")
	case errors.Is(err, errInterrupted):
		return &worker.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: worker.Str("interrupted"), Message: "the job was interrupted"}
	case st == jobCanceled:
		return &worker.Error{Status: 499, Type: "invalid_request_error", Code: worker.Str("canceled"), Message: "the request was canceled"}
	case errors.Is(err, errs.ErrArgument), errors.Is(err, errs.ErrShape), errors.Is(err, errs.ErrUnsupported):
		return worker.BadRequest("", "%v", err)
	case errors.Is(err, errs.ErrOutOfMemory):
		return &worker.Error{Status: http.StatusInsufficientStorage, Type: "server_error", Code: worker.Str("out_of_memory"),
			Message: fmt.Sprintf("the device ran out of memory: %v; ask for fewer images or a smaller size", err)}
	}
	return &worker.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("the generation failed: %v", err)}
}

// pngs encodes a finished job's images with their parameters; seeds of
// a batch's images share the request's seed (the pipeline draws the
// batch's noise from one stream).
func pngs(j *job) ([][]byte, error) {
	imgs, _, _ := j.result()
	out := make([][]byte, len(imgs))
	for i, img := range imgs {
		b, err := encodePNG(img, j.info.infotext())
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// timings is what a response says of the time a job took.
type timings struct {
	Queued  float64 `json:"queued_s"`
	Total   float64 `json:"total_s"`
	Batched int     `json:"batched"`
	ItPerS  float64 `json:"it_per_s"`
}

func jobTimings(j *job) timings {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := timings{Queued: j.started.Sub(j.created).Seconds(), Total: j.finished.Sub(j.created).Seconds(), Batched: j.batched}
	if run := j.finished.Sub(j.started).Seconds(); run > 0 {
		t.ItPerS = float64(j.steps) / run
	}
	return t
}
