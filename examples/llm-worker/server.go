package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/errs"
)

// ServerConfig is what the HTTP layer needs besides the backend.
type ServerConfig struct {
	ModelID          string        // the name clients use and /v1/models lists
	Version          string        // the worker's version, in /health
	MaxTokensDefault int           // a request's max_tokens when it gives none
	MaxBodyBytes     int64         // the largest request body
	APIToken         string        // when set, every endpoint but GET /health wants "Authorization: Bearer <token>"
	WriteTimeout     time.Duration // the longest one write to a client may block (a client that stops reading)
	ReadTimeout      time.Duration // the longest a request's body may take to arrive, from its headers on; 0: none
	RequestTimeout   time.Duration // the longest a generation may run, from its submission on; 0: none
	QueueTimeout     time.Duration // the longest a generation may wait for its first token; 0: none
	Logger           *slog.Logger
}

// Why a generation was cut: the context causes the server cancels with.
var (
	errShutdown       = errors.New("the worker shut down")
	errRequestTimeout = errors.New("the request's deadline passed")
	errQueueTimeout   = errors.New("the request waited too long for a slot")
)

// Finish reasons of generations the worker cut: none of OpenAI's, so that
// no client takes a cut answer for a whole one.
const (
	finishShutdown = "shutdown"
	finishTimeout  = "timeout"
)

// Server states, in the order they come.
const (
	stateLoading int32 = iota
	stateReady
	stateDraining
)

var stateNames = [...]string{stateLoading: "loading", stateReady: "ready", stateDraining: "draining"}

// Server is the worker's HTTP API: health, models, and OpenAI's completions
// and chat completions, plain and streamed. It serves from the start: while
// the model loads, /health says so and generation answers 503.
type Server struct {
	cfg     ServerConfig
	log     *slog.Logger
	created int64
	token   [sha256.Size]byte // the API token's hash; compared in constant time

	state    atomic.Int32
	mu       sync.RWMutex
	backend  Backend
	inflight atomic.Int64
	handler  http.Handler

	load     queueLoad
	stopping context.Context // cancelled with errShutdown: every generation is cut
	stop     context.CancelCauseFunc
	cut      atomic.Int64 // generations cut by the shutdown
}

// NewServer makes the API in the loading state.
func NewServer(cfg ServerConfig) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.MaxTokensDefault <= 0 {
		cfg.MaxTokensDefault = 512
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, created: time.Now().Unix()}
	s.stopping, s.stop = context.WithCancelCause(context.Background())
	if cfg.APIToken != "" {
		s.token = sha256.Sum256([]byte(cfg.APIToken))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.health)
	mux.HandleFunc("/ready", s.ready)
	mux.HandleFunc("/live", s.live)
	mux.HandleFunc("/v1/models", s.models)
	mux.HandleFunc("/v1/completions", s.completions)
	mux.HandleFunc("/v1/chat/completions", s.chatCompletions)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("no endpoint %s %s: this worker serves GET /health, GET /ready, GET /live, GET /v1/models, POST /v1/completions and POST /v1/chat/completions", r.Method, r.URL.Path)})
	})
	s.handler = s.recoverer(s.readDeadline(s.auth(mux)))
	return s
}

// Handler is the API's handler.
func (s *Server) Handler() http.Handler { return s.handler }

// SetReady serves b: generation opens.
func (s *Server) SetReady(b Backend) {
	s.mu.Lock()
	s.backend = b
	s.mu.Unlock()
	s.state.Store(stateReady)
}

// Drain refuses new generations (503); the ones under way go on.
func (s *Server) Drain() { s.state.Store(stateDraining) }

// Shutdown drains the server and waits for the generations under way to
// end, until ctx ends; then it cuts the rest (streams end with an error
// event, finish_reason "shutdown" and [DONE]; other requests get a 503)
// and waits, for at most cutGrace, for their answers to be written. It
// returns how many generations it cut. The listener is not the server's:
// it stays open, and new requests get a 503 meanwhile.
func (s *Server) Shutdown(ctx context.Context) int {
	s.Drain()
	if !s.waitIdle(ctx) {
		s.stop(errShutdown)
		grace, cancel := context.WithTimeout(context.Background(), cutGrace)
		if !s.waitIdle(grace) {
			s.log.Warn("cut requests still writing their answers", "in_flight", s.inflight.Load())
		}
		cancel()
	}
	return int(s.cut.Load())
}

// cutGrace bounds the writing of cut answers (a client that stopped
// reading holds a write for up to WriteTimeout).
const cutGrace = 10 * time.Second

// waitIdle waits until no generation is under way (true) or ctx ends.
func (s *Server) waitIdle(ctx context.Context) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for s.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// Status is "loading", "ready" or "draining".
func (s *Server) Status() string { return stateNames[s.state.Load()] }

// InFlight is the number of generations under way.
func (s *Server) InFlight() int64 { return s.inflight.Load() }

// current is the backend when the server is ready, else the error to send.
func (s *Server) current() (Backend, *apiError) {
	switch s.state.Load() {
	case stateLoading:
		return nil, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("model_loading"),
			Message: "the model is still loading: try again shortly"}
	case stateDraining:
		return nil, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("draining"),
			Message: "the worker is shutting down: send the request to another worker"}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.backend, nil
}

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only our own types are written: this is a bug
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding the response failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeError sends e in OpenAI's error shape.
func writeError(w http.ResponseWriter, e *apiError) {
	switch {
	case e.RetryAfter > 0:
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	case e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "5")
	}
	writeJSON(w, e.Status, map[string]*apiError{"error": e})
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
		Message: fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, allow)})
}

// probes are the endpoints load balancers, orchestrators and the hive call
// without credentials.
var probes = map[string]bool{"/health": true, "/ready": true, "/live": true}

// auth wants the bearer token on every endpoint but the probes.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.APIToken == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if probes[r.URL.Path] && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		// Hashes of equal length, compared in constant time: neither the
		// token's bytes nor its length show in the timing.
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], s.token[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="llm-worker"`)
			writeError(w, &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: strp("invalid_api_key"),
				Message: "missing or wrong API key: send \"Authorization: Bearer <LLORCH_API_TOKEN>\""})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readDeadline bounds the time a request's body may take: a client that
// stops sending it would hold its connection and its handler for good.
// decodeBody lifts the deadline once the body is read, so that it never
// cuts a stream (net/http cancels a request whose connection read fails).
// http.Server.ReadTimeout would, hence the deadline per request.
func (s *Server) readDeadline(next http.Handler) http.Handler {
	if s.cfg.ReadTimeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Not every writer has deadlines (httptest's recorder): that is no error.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout))
		next.ServeHTTP(w, r)
	})
}

// trackingWriter remembers whether a response has begun, for recoverer.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) { t.wrote = true; t.ResponseWriter.WriteHeader(code) }
func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// write deadlines).
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// recoverer is the last line of defence: a handler that panics is a bug,
// logged with its stack, and the client gets a 500 instead of a dropped
// connection; the worker goes on.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &trackingWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { // net/http's own way to abort a response: let it through
				panic(v)
			}
			s.log.Error("handler panicked: this is a bug", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !tw.wrote {
				writeError(tw, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "internal error"})
			}
		}()
		next.ServeHTTP(tw, r)
	})
}

// health answers GET /health: 200 when ready, 503 while loading or
// draining, with the status in the body either way.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, r, "GET, HEAD")
		return
	}
	st := s.state.Load()
	body := map[string]any{"status": stateNames[st], "model": s.cfg.ModelID, "implementation": implementation, "version": s.cfg.Version}
	status := http.StatusServiceUnavailable
	s.mu.RLock()
	b := s.backend
	s.mu.RUnlock()
	if b != nil { // nil when a shutdown came during loading
		info := b.Info()
		body["device"], body["dtype"], body["context_length"] = info.Device, info.DType, b.ContextLength()
		body["in_flight"] = s.inflight.Load()
	}
	if st == stateReady {
		status = http.StatusOK
	}
	writeJSON(w, status, body)
}

// ready answers GET /ready: 200 when the worker takes requests, 503 while
// it loads or drains; the status is in the body either way.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	s.probe(w, r, s.state.Load() == stateReady)
}

// live answers GET /live: 200 while the process serves, whatever its
// state, which the body says.
func (s *Server) live(w http.ResponseWriter, r *http.Request) { s.probe(w, r, true) }

func (s *Server) probe(w http.ResponseWriter, r *http.Request, ok bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, r, "GET, HEAD")
		return
	}
	status := http.StatusServiceUnavailable
	if ok {
		status = http.StatusOK
	}
	writeJSON(w, status, map[string]string{"status": s.Status()})
}

// models answers GET /v1/models with the one model this worker serves.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, r, "GET")
		return
	}
	card := modelCard{ID: s.cfg.ModelID, Object: "model", Created: s.created, OwnedBy: "rocm-go"}
	if b, err := s.current(); err == nil {
		card.MaxModelLen = b.ContextLength()
	}
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{card}})
}

// job is a checked generation request.
type job struct {
	id           string
	req          generate.Request
	maxParam     string // the parameter that set req.MaxTokens
	stream       bool
	includeUsage bool
	format       formatter
}

// formatter makes one endpoint's response objects.
type formatter interface {
	first() any                             // the stream's opening chunk, or nil
	chunk(text string) any                  // a stream chunk with new text
	final(finish string, u usage) any       // the stream's closing chunk
	usageOnly(u usage) any                  // the stream_options.include_usage chunk
	whole(text, finish string, u usage) any // the non-streamed response
}

// common checks the fields both endpoints share once the prompt's tokens
// are known, and fills the engine request; what the request asks of the
// model (token ids, the context) generate.Check judges when the engine
// takes it.
func (s *Server) common(b Backend, p *samplingParams, ids []int32) (*job, *apiError) {
	maxTok, maxParam, aerr := p.maxTokens(len(ids), b.ContextLength(), s.cfg.MaxTokensDefault)
	if aerr != nil {
		return nil, aerr
	}
	smp, aerr := p.sampling()
	if aerr != nil {
		return nil, aerr
	}
	stop, aerr := parseStop(p.Stop)
	if aerr != nil {
		return nil, aerr
	}
	return &job{req: generate.Request{Prompt: ids, MaxTokens: maxTok, Sampling: smp, StopTokens: b.EOS(), StopStrings: stop}, maxParam: maxParam}, nil
}

// checkModel wants the request's model, when it names one, to be this
// worker's.
func (s *Server) checkModel(p *samplingParams) *apiError {
	if p.Model == nil || *p.Model == "" || *p.Model == s.cfg.ModelID {
		return nil
	}
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: strp("model"), Code: strp("model_not_found"),
		Message: fmt.Sprintf("the model %q is not served here: this worker serves %q", *p.Model, s.cfg.ModelID)}
}

// completions answers POST /v1/completions.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	serveJob(s, w, r, s.completionJob)
}

// serveJob reads a POST body as a request R, makes its job and runs it.
func serveJob[R any](s *Server, w http.ResponseWriter, r *http.Request, makeJob func(Backend, *R) (*job, *apiError)) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, r, "POST")
		return
	}
	b, aerr := s.current()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req R
	if aerr := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	j, aerr := makeJob(b, &req)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.generate(w, r, b, j)
}

func (s *Server) completionJob(b Backend, req *completionRequest) (*job, *apiError) {
	if aerr := s.checkModel(&req.samplingParams); aerr != nil {
		return nil, aerr
	}
	if aerr := req.unsupported(); aerr != nil {
		return nil, aerr
	}
	p, aerr := parsePrompt(req.Prompt)
	if aerr != nil {
		return nil, aerr
	}
	ids := p.ids
	if !p.isID {
		var err error
		if ids, err = b.Encode(p.text, true); err != nil {
			return nil, badRequest("prompt", "prompt: %v", err)
		}
		if len(ids) == 0 {
			return nil, badRequest("prompt", "prompt is empty once tokenized")
		}
	}
	j, aerr := s.common(b, &req.samplingParams, ids)
	if aerr != nil {
		return nil, aerr
	}
	j.id = newID("cmpl-")
	j.stream, j.includeUsage = req.Stream, req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	j.format = completionFormat{id: j.id, model: s.cfg.ModelID, created: time.Now().Unix()}
	return j, nil
}

// chatCompletions answers POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	serveJob(s, w, r, s.chatJob)
}

func (s *Server) chatJob(b Backend, req *chatRequest) (*job, *apiError) {
	if aerr := s.checkModel(&req.samplingParams); aerr != nil {
		return nil, aerr
	}
	if aerr := req.unsupported(); aerr != nil {
		return nil, aerr
	}
	msgs, aerr := parseMessages(req.Messages)
	if aerr != nil {
		return nil, aerr
	}
	text, err := b.ApplyChatTemplate(msgs, true)
	if err != nil {
		return nil, badRequest("messages", "the model's chat template rejects these messages: %v", err)
	}
	// The template wrote the special tokens itself.
	ids, err := b.Encode(text, false)
	if err != nil {
		return nil, badRequest("messages", "messages: %v", err)
	}
	if len(ids) == 0 {
		return nil, badRequest("messages", "messages are empty once tokenized")
	}
	j, aerr := s.common(b, &req.samplingParams, ids)
	if aerr != nil {
		return nil, aerr
	}
	j.id = newID("chatcmpl-")
	j.stream, j.includeUsage = req.Stream, req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	j.format = chatFormat{id: j.id, model: s.cfg.ModelID, created: time.Now().Unix()}
	return j, nil
}

// fieldParams name the OpenAI parameter behind each field of
// generate.Request that generate.Check may refuse.
var fieldParams = map[string]string{
	"Prompt": "prompt", "StopStrings": "stop", "Sampling.Temperature": "temperature", "Sampling.TopP": "top_p",
	"Sampling.TopK": "top_k", "Sampling.MinP": "min_p", "Sampling.RepetitionPenalty": "repetition_penalty",
}

// generateError maps Generate's refusal of j to a status: the engine's
// checks of the request are the client's to fix (400, naming the
// parameter), a full queue is 429, a closed engine 503.
func generateError(err error, j *job) *apiError {
	var e *errs.Error
	switch {
	case errors.Is(err, generate.ErrQueueFull):
		return &apiError{Status: http.StatusTooManyRequests, Type: "server_error", Code: strp("queue_full"),
			Message: "the worker's queue is full: retry after a moment"}
	case errors.Is(err, errs.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("unavailable"),
			Message: fmt.Sprintf("the model is not serving: %v", err)}
	case (errors.Is(err, errs.ErrArgument) || errors.Is(err, generate.ErrContextLength)) && errors.As(err, &e):
		param := fieldParams[e.Field]
		if e.Field == "MaxTokens" {
			param = j.maxParam
		}
		aerr := badRequest(param, "%s", e.Detail)
		if errors.Is(err, generate.ErrContextLength) {
			aerr.withCode("context_length_exceeded")
		}
		return aerr
	default:
		return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("starting the generation: %v", err)}
	}
}

// endError is the error of a generation that ended without finishing.
func endError(ev generate.Event) *apiError {
	msg := "the generation failed"
	switch {
	case ev.Err != nil:
		msg = fmt.Sprintf("the generation failed: %v", ev.Err)
	case ev.FinishReason == "cancelled":
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("cancelled"),
			Message: "the generation was cancelled: the worker is shutting down"}
	}
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: msg}
}

// finished reports whether a Done event finished the request normally,
// and its OpenAI finish_reason.
func finished(ev generate.Event) (string, bool) {
	if ev.Err != nil {
		return "", false
	}
	switch ev.FinishReason {
	case "stop", "":
		return "stop", true
	case "length":
		return "length", true
	}
	return "", false
}

// generate runs a checked job and answers with its result, whole or
// streamed. The generation's context is the request's: a client that goes
// away cancels it, and the handler waits for the backend to end the event
// channel, so that nothing of the request outlives it. The worker cancels
// it too, with a cause the client is told: the shutdown, the request's
// deadline, a wait too long for a slot. A stream opens with the
// generation's first event, so that a request that never starts gets a
// status rather than a broken stream.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, b Backend, j *job) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	start := time.Now()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer context.AfterFunc(s.stopping, func() { cancel(context.Cause(s.stopping)) })()
	if d := s.cfg.RequestTimeout; d > 0 {
		defer time.AfterFunc(d, func() { cancel(errRequestTimeout) }).Stop()
	}
	var queued *time.Timer
	if d := s.cfg.QueueTimeout; d > 0 {
		queued = time.AfterFunc(d, func() { cancel(errQueueTimeout) })
		defer queued.Stop()
	}
	events, err := b.Generate(ctx, j.req)
	if err != nil {
		aerr := generateError(err, j)
		if aerr.Status == http.StatusTooManyRequests {
			aerr.RetryAfter = s.load.retryAfter()
		}
		s.log.Warn("generation refused", "id", j.id, "status", aerr.Status, "err", err)
		writeError(w, aerr)
		return
	}
	s.load.submitted()
	started, counted := false, false
	endLoad := func(took time.Duration) {
		if !counted {
			counted = true
			s.load.ended(started, took)
		}
	}
	defer func() {
		endLoad(0)
		cancel(nil)
		for range events { // the backend ends the channel once cancelled
		}
	}()
	var (
		text      strings.Builder
		firstAt   time.Duration
		completed int
		last      generate.Event
		cause     error // why the worker cut the generation
	)
	rc := http.NewResponseController(w)
	var sse *sseWriter
	stream := func() *sseWriter {
		if sse == nil {
			sse = newSSEWriter(w, rc, s.cfg.WriteTimeout)
			if f := j.format.first(); f != nil {
				sse.send(f) // a failure stays in sse: every later send fails
			}
		}
		return sse
	}
	for ev := range events {
		if !started {
			started = true
			s.load.started()
			if queued != nil && !queued.Stop() {
				cause = errQueueTimeout // its wait ran out as it began: it is being cancelled
				break
			}
		}
		if ev.Text != "" && firstAt == 0 {
			firstAt = time.Since(start)
		}
		completed += len(ev.Tokens)
		if ev.Text != "" {
			if !j.stream {
				text.WriteString(ev.Text)
			} else if err := stream().send(j.format.chunk(ev.Text)); err != nil {
				s.log.Info("request cancelled: the client stopped reading", "id", j.id, "err", err)
				return
			}
		}
		if ev.Done || ev.Err != nil {
			last = ev
			break
		}
	}
	u := usage{PromptTokens: last.PromptTokens, CompletionTokens: last.CompletionTokens}
	if u.PromptTokens == 0 {
		u.PromptTokens = len(j.req.Prompt)
	}
	if u.CompletionTokens == 0 {
		u.CompletionTokens = completed
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	finish, ok := finished(last)
	ok = ok && last.Done // not a generation the queue wait cut before its first event
	if cause == nil && !ok && ctx.Err() != nil {
		cause = context.Cause(ctx)
	}
	if ok {
		endLoad(time.Since(start))
	} else {
		endLoad(0)
	}
	switch {
	case cause == errQueueTimeout:
		aerr := &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("queue_timeout"), RetryAfter: s.load.retryAfter(),
			Message: fmt.Sprintf("the request waited %v for a slot (the worker's -queue-timeout): retry after Retry-After seconds, or on another worker", s.cfg.QueueTimeout)}
		s.log.Warn("request cut: it waited too long for a slot", "id", j.id, "retry_after", aerr.RetryAfter)
		writeError(w, aerr)
		return
	case cause == errShutdown || cause == errRequestTimeout:
		// The tokens the client got: the backend's count may hold one
		// drawn as it was cancelled, never delivered.
		u.CompletionTokens = completed
		u.TotalTokens = u.PromptTokens + completed
		s.cutShort(w, sse, j, cause, u, time.Since(start))
		return
	case !ok && ctx.Err() != nil:
		s.log.Info("request cancelled: the client went away", "id", j.id, "after", time.Since(start).Round(time.Millisecond))
		return
	}
	if !last.Done && last.Err == nil {
		last.Err = errors.New("the backend ended the stream without a final event")
	}
	if !ok {
		aerr := endError(last)
		s.log.Error("generation failed", "id", j.id, "finish_reason", last.FinishReason, "err", last.Err)
		if sse == nil {
			writeError(w, aerr)
		} else {
			sse.send(map[string]*apiError{"error": aerr})
			sse.done()
		}
		return
	}
	if !j.stream {
		rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		writeJSON(w, http.StatusOK, j.format.whole(text.String(), finish, u))
	} else {
		if stream().send(j.format.final(finish, u)) != nil {
			return
		}
		if j.includeUsage && sse.send(j.format.usageOnly(u)) != nil {
			return
		}
		sse.done()
	}
	took := time.Since(start)
	attrs := []any{"id", j.id, "prompt_tokens", u.PromptTokens, "completion_tokens", u.CompletionTokens,
		"finish_reason", finish, "stream", j.stream, "took", took.Round(time.Millisecond)}
	if firstAt > 0 {
		attrs = append(attrs, "first_token", firstAt.Round(time.Millisecond))
		if u.CompletionTokens > 1 && took > firstAt {
			attrs = append(attrs, "tokens_per_s", fmt.Sprintf("%.1f", float64(u.CompletionTokens-1)/(took-firstAt).Seconds()))
		}
	}
	s.log.Info("generation done", attrs...)
}

// cutShort answers a generation the worker cut (the shutdown, the
// request's deadline). A stream under way gets an error event, a final
// chunk whose finish_reason says why ("shutdown", "timeout") and [DONE]:
// a client that reads errors stops at the first, one that reads only
// finish_reason still sees that the answer is not whole. A request that
// has no stream open gets the error with its status: 503 for the
// shutdown, 504 for the deadline.
func (s *Server) cutShort(w http.ResponseWriter, sse *sseWriter, j *job, cause error, u usage, after time.Duration) {
	finish := finishTimeout
	aerr := &apiError{Status: http.StatusGatewayTimeout, Type: "server_error", Code: strp("request_timeout"),
		Message: fmt.Sprintf("the generation was cut after %v (the worker's -request-timeout): ask for fewer tokens", s.cfg.RequestTimeout)}
	if cause == errShutdown {
		s.cut.Add(1)
		finish = finishShutdown
		aerr = &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("shutdown"),
			Message: "the generation was cut: the worker shut down before it ended; send the request to another worker"}
	}
	s.log.Warn("request cut", "id", j.id, "finish_reason", finish, "completion_tokens", u.CompletionTokens, "after", after.Round(time.Millisecond))
	if sse == nil {
		writeError(w, aerr)
		return
	}
	if sse.send(map[string]*apiError{"error": aerr}) != nil || sse.send(j.format.final(finish, u)) != nil {
		return
	}
	if j.includeUsage && sse.send(j.format.usageOnly(u)) != nil {
		return
	}
	sse.done()
}

// newID is an OpenAI-style id: prefix and 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// completionFormat makes /v1/completions' objects.
type completionFormat struct {
	id, model string
	created   int64
}

func (f completionFormat) obj(choices []completionChoice, u *usage) completionResponse {
	return completionResponse{ID: f.id, Object: "text_completion", Created: f.created, Model: f.model, Choices: choices, Usage: u}
}

func (f completionFormat) first() any { return nil }
func (f completionFormat) chunk(text string) any {
	return f.obj([]completionChoice{{Text: text}}, nil)
}
func (f completionFormat) final(finish string, u usage) any {
	return f.obj([]completionChoice{{FinishReason: &finish}}, &u)
}
func (f completionFormat) usageOnly(u usage) any { return f.obj([]completionChoice{}, &u) }
func (f completionFormat) whole(text, finish string, u usage) any {
	return f.obj([]completionChoice{{Text: text, FinishReason: &finish}}, &u)
}

// chatFormat makes /v1/chat/completions' objects.
type chatFormat struct {
	id, model string
	created   int64
}

func (f chatFormat) obj(object string, choices []chatChoice, u *usage) chatResponse {
	return chatResponse{ID: f.id, Object: object, Created: f.created, Model: f.model, Choices: choices, Usage: u}
}

func (f chatFormat) first() any {
	empty := ""
	return f.obj("chat.completion.chunk", []chatChoice{{Delta: &chatMessageOut{Role: "assistant", Content: &empty}}}, nil)
}
func (f chatFormat) chunk(text string) any {
	return f.obj("chat.completion.chunk", []chatChoice{{Delta: &chatMessageOut{Content: &text}}}, nil)
}
func (f chatFormat) final(finish string, u usage) any {
	return f.obj("chat.completion.chunk", []chatChoice{{Delta: &chatMessageOut{}, FinishReason: &finish}}, &u)
}
func (f chatFormat) usageOnly(u usage) any { return f.obj("chat.completion.chunk", []chatChoice{}, &u) }
func (f chatFormat) whole(text, finish string, u usage) any {
	return f.obj("chat.completion", []chatChoice{{Message: &chatMessageOut{Role: "assistant", Content: &text}, FinishReason: &finish}}, &u)
}
