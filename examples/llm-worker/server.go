package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/internal/worker"
)

// ServerConfig is what the HTTP layer needs besides the backend.
type ServerConfig struct {
	ModelID          string        // the name clients use and /v1/models lists
	Version          string        // the worker's version, in /health
	MaxTokensDefault int           // a request's max_tokens when it gives none
	MaxBodyBytes     int64         // the largest request body
	APIToken         string        // when set, every endpoint but GET of the probes and /metrics wants "Authorization: Bearer <token>"
	WriteTimeout     time.Duration // the longest one write to a client may block (a client that stops reading)
	ReadTimeout      time.Duration // the longest a request's body may take to arrive, from its headers on; 0: none
	RequestTimeout   time.Duration // the longest a generation may run, from its submission on; 0: none
	QueueTimeout     time.Duration // the longest a generation may wait for its first token; 0: none
	Logger           *slog.Logger
}

// Why a generation was cut (besides worker.ErrShutdown): the context
// causes the server cancels with.
var (
	errRequestTimeout = errors.New("the request's deadline passed")
	errQueueTimeout   = errors.New("the request waited too long for a slot")
)

// Finish reasons of generations the worker cut: none of OpenAI's, so that
// no client takes a cut answer for a whole one.
const (
	finishShutdown = "shutdown"
	finishTimeout  = "timeout"
)

// Server is the worker's HTTP API: health, models, and OpenAI's completions
// and chat completions, plain and streamed. It serves from the start: while
// the model loads, /health says so and generation answers 503.
type Server struct {
	cfg     ServerConfig
	log     *slog.Logger
	created int64
	gate    *worker.Gate

	mu      sync.RWMutex
	backend Backend
	handler http.Handler

	load     worker.QueueLoad
	rate     worker.RateMeter
	metrics  *metrics
	grammars grammars // response_format's compiled schemas
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
	log := slog.New(worker.RequestIDs(cfg.Logger.Handler()))
	s := &Server{cfg: cfg, log: log, created: time.Now().Unix(), gate: worker.NewGate(cfg.Logger)}
	s.metrics = newMetrics(s)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.health)
	mux.HandleFunc("/ready", s.gate.ReadyHandler)
	mux.HandleFunc("/live", s.gate.LiveHandler)
	mux.Handle("/metrics", s.metrics.reg)
	mux.HandleFunc("/v1/models", s.models)
	mux.HandleFunc("/v1/completions", s.completions)
	mux.HandleFunc("/v1/chat/completions", s.chatCompletions)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		worker.WriteError(w, &worker.Error{Status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("no endpoint %s %s: this worker serves GET /health, GET /ready, GET /live, GET /metrics, GET /v1/models, POST /v1/completions and POST /v1/chat/completions", r.Method, r.URL.Path)})
	})
	s.handler = worker.Observe(s.log, s.metrics.reg, mux,
		worker.Recoverer(s.log, worker.ReadDeadline(cfg.ReadTimeout, worker.Auth(cfg.APIToken, "llm-worker", mux))))
	return s
}

// Handler is the API's handler.
func (s *Server) Handler() http.Handler { return s.handler }

// SetReady serves b: generation opens.
func (s *Server) SetReady(b Backend) {
	s.mu.Lock()
	s.backend = b
	s.mu.Unlock()
	s.gate.SetReady()
}

// Gate is the server's lifecycle: its state, the generations under way,
// the shutdown.
func (s *Server) Gate() *worker.Gate { return s.gate }

// Load is the heartbeats' figures: generations running and waiting, and
// tokens generated per second since the last beat.
func (s *Server) Load() worker.Load {
	w, r := s.load.Counts()
	return worker.Load{Running: r, Waiting: w, Rate: s.rate.Rate(int64(s.metrics.genTokens.Value())), Unit: "tokens/s"}
}

// loaded is the backend once the model has loaded, nil before.
func (s *Server) loaded() Backend {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.backend
}

// current is the backend when the server is ready, else the error to send.
func (s *Server) current() (Backend, *worker.Error) {
	if aerr := s.gate.Check(); aerr != nil {
		return nil, aerr
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.backend, nil
}

// health answers GET /health: 200 when ready, 503 while loading or
// draining, with the status in the body either way.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		worker.MethodNotAllowed(w, r, "GET, HEAD")
		return
	}
	status, body := s.gate.Health(s.cfg.ModelID, s.cfg.Version)
	if b := s.loaded(); b != nil { // nil when a shutdown came during loading
		info := b.Info()
		body["device"], body["dtype"], body["context_length"] = info.Device, info.DType, b.ContextLength()
		body["weights"] = info.Weights
		body["in_flight"] = s.gate.InFlight()
	}
	worker.WriteJSON(w, status, body)
}

// models answers GET /v1/models with the one model this worker serves.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		worker.MethodNotAllowed(w, r, "GET")
		return
	}
	card := modelCard{ID: s.cfg.ModelID, Object: "model", Created: s.created, OwnedBy: "rocm-go"}
	if b, err := s.current(); err == nil {
		card.MaxModelLen = b.ContextLength()
	}
	worker.WriteJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{card}})
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

// settler is a formatter that reads the output (its tool calls) and
// settles it once the generation finished: see toolFormat.settle.
type settler interface {
	settle(text, finish string) (string, *worker.Error)
}

// formatter makes one endpoint's response objects.
type formatter interface {
	first() any                             // the stream's opening chunk, or nil
	chunk(text string) any                  // a stream chunk with new text, or nil to send nothing yet
	final(finish string, u usage) any       // the stream's closing chunk
	usageOnly(u usage) any                  // the stream_options.include_usage chunk
	whole(text, finish string, u usage) any // the non-streamed response
}

// common checks the fields both endpoints share once the prompt's tokens
// are known, and fills the engine request; what the request asks of the
// model (token ids, the context) generate.Check judges when the engine
// takes it.
func (s *Server) common(b Backend, p *samplingParams, ids []int32) (*job, *worker.Error) {
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
	j := &job{req: generate.Request{Prompt: ids, MaxTokens: maxTok, Sampling: smp, StopTokens: b.EOS(), StopStrings: stop}, maxParam: maxParam}
	if aerr := s.applyResponseFormat(b, p, &j.req); aerr != nil {
		return nil, aerr
	}
	return j, nil
}

// checkModel wants the request's model, when it names one, to be this
// worker's.
func (s *Server) checkModel(p *samplingParams) *worker.Error {
	if p.Model == nil || *p.Model == "" || *p.Model == s.cfg.ModelID {
		return nil
	}
	return &worker.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: worker.Str("model"), Code: worker.Str("model_not_found"),
		Message: fmt.Sprintf("the model %q is not served here: this worker serves %q", *p.Model, s.cfg.ModelID)}
}

// completions answers POST /v1/completions.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	serveJob(s, w, r, s.completionJob)
}

// serveJob reads a POST body as a request R, makes its job and runs it.
func serveJob[R any](s *Server, w http.ResponseWriter, r *http.Request, makeJob func(Backend, *R) (*job, *worker.Error)) {
	if r.Method != http.MethodPost {
		worker.MethodNotAllowed(w, r, "POST")
		return
	}
	b, aerr := s.current()
	if aerr != nil {
		worker.WriteError(w, aerr)
		return
	}
	var req R
	if aerr := worker.DecodeJSON(w, r, s.cfg.MaxBodyBytes, &req); aerr != nil {
		worker.WriteError(w, aerr)
		return
	}
	j, aerr := makeJob(b, &req)
	if aerr != nil {
		worker.WriteError(w, aerr)
		return
	}
	s.generate(w, r, b, j)
}

func (s *Server) completionJob(b Backend, req *completionRequest) (*job, *worker.Error) {
	if aerr := s.checkModel(&req.samplingParams); aerr != nil {
		return nil, aerr
	}
	if aerr := req.unsupported(); aerr != nil {
		return nil, aerr
	}
	if t := bytes.TrimSpace(req.Tools); !rawIsNull(t) && !bytes.Equal(t, []byte("[]")) {
		return nil, worker.BadRequest("tools", "tools: the completions endpoint takes no tools: send them to /v1/chat/completions")
	}
	p, aerr := parsePrompt(req.Prompt)
	if aerr != nil {
		return nil, aerr
	}
	ids := p.ids
	if !p.isID {
		var err error
		if ids, err = b.Encode(p.text, true); err != nil {
			return nil, worker.BadRequest("prompt", "prompt: %v", err)
		}
		if len(ids) == 0 {
			return nil, worker.BadRequest("prompt", "prompt is empty once tokenized")
		}
	}
	j, aerr := s.common(b, &req.samplingParams, ids)
	if aerr != nil {
		return nil, aerr
	}
	j.id = worker.NewID("cmpl-")
	j.stream, j.includeUsage = req.Stream, req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	j.format = completionFormat{id: j.id, model: s.cfg.ModelID, created: time.Now().Unix()}
	return j, nil
}

// chatCompletions answers POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	serveJob(s, w, r, s.chatJob)
}

func (s *Server) chatJob(b Backend, req *chatRequest) (*job, *worker.Error) {
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
	ts, aerr := parseTools(b, req)
	if aerr != nil {
		return nil, aerr
	}
	text, aerr := chatPrompt(b, msgs, ts)
	if aerr != nil {
		return nil, aerr
	}
	// The template wrote the special tokens itself.
	ids, err := b.Encode(text, false)
	if err != nil {
		return nil, worker.BadRequest("messages", "messages: %v", err)
	}
	if len(ids) == 0 {
		return nil, worker.BadRequest("messages", "messages are empty once tokenized")
	}
	j, aerr := s.common(b, &req.samplingParams, ids)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := s.constrainToolCall(b, &j.req, ts); aerr != nil {
		return nil, aerr
	}
	j.id = worker.NewID("chatcmpl-")
	j.stream, j.includeUsage = req.Stream, req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	j.format = newToolFormat(chatFormat{id: j.id, model: s.cfg.ModelID, created: time.Now().Unix()}, ts, req.Stream)
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
func generateError(err error, j *job) *worker.Error {
	var e *errs.Error
	switch {
	case errors.Is(err, generate.ErrQueueFull):
		return &worker.Error{Status: http.StatusTooManyRequests, Type: "server_error", Code: worker.Str("queue_full"),
			Message: "the worker's queue is full: retry after a moment"}
	case errors.Is(err, errs.ErrClosed):
		return &worker.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: worker.Str("unavailable"),
			Message: fmt.Sprintf("the model is not serving: %v", err)}
	case (errors.Is(err, errs.ErrArgument) || errors.Is(err, generate.ErrContextLength)) && errors.As(err, &e):
		param := fieldParams[e.Field]
		if e.Field == "MaxTokens" {
			param = j.maxParam
		}
		aerr := worker.BadRequest(param, "%s", e.Detail)
		if errors.Is(err, generate.ErrContextLength) {
			aerr.WithCode("context_length_exceeded")
		}
		return aerr
	default:
		return &worker.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("starting the generation: %v", err)}
	}
}

// endError is the error of a generation that ended without finishing.
func endError(ev generate.Event) *worker.Error {
	msg := "the generation failed"
	switch {
	case ev.Err != nil:
		msg = fmt.Sprintf("the generation failed: %v", ev.Err)
	case ev.FinishReason == "cancelled":
		return &worker.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: worker.Str("cancelled"),
			Message: "the generation was cancelled: the worker is shutting down"}
	}
	return &worker.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: msg}
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
	defer s.gate.Enter()()
	start := time.Now()
	rctx := r.Context() // its log lines carry the request's id
	ctx, cancel := context.WithCancelCause(rctx)
	defer cancel(nil)
	defer context.AfterFunc(s.gate.Stopping(), func() { cancel(context.Cause(s.gate.Stopping())) })()
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
			aerr.RetryAfter = s.load.RetryAfter()
		}
		s.log.WarnContext(rctx, "generation refused", "id", j.id, "status", aerr.Status, "err", err)
		worker.WriteError(w, aerr)
		return
	}
	s.load.Submitted()
	tm := &timing{m: s.metrics, start: start}
	reason := "abort" // the client stopped reading, unless a later line says otherwise
	defer func() { tm.end(reason) }()
	started, counted := false, false
	endLoad := func(took time.Duration) {
		if !counted {
			counted = true
			s.load.Ended(started, took)
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
	var sse *worker.SSE
	stream := func() *worker.SSE {
		if sse == nil {
			sse = worker.NewSSE(w, rc, s.cfg.WriteTimeout)
			if f := j.format.first(); f != nil {
				sse.Send(f) // a failure stays in sse: every later send fails
			}
		}
		return sse
	}
	for ev := range events {
		if !started {
			started = true
			s.load.Started()
			if queued != nil && !queued.Stop() {
				cause = errQueueTimeout // its wait ran out as it began: it is being cancelled
				break
			}
		}
		if ev.Text != "" && firstAt == 0 {
			firstAt = time.Since(start)
		}
		if _, fin := finished(ev); len(ev.Tokens) > 0 || ev.Done && fin {
			tm.event(len(ev.Tokens), len(j.req.Prompt))
		}
		completed += len(ev.Tokens)
		if ev.Text != "" {
			if !j.stream {
				text.WriteString(ev.Text)
			} else if c := j.format.chunk(ev.Text); c == nil {
				// held back: it may be a tool call
			} else if err := stream().Send(c); err != nil {
				s.log.InfoContext(rctx, "request cancelled: the client stopped reading", "id", j.id, "err", err)
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
		reason = finishTimeout
		aerr := &worker.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: worker.Str("queue_timeout"), RetryAfter: s.load.RetryAfter(),
			Message: fmt.Sprintf("the request waited %v for a slot (the worker's -queue-timeout): retry after Retry-After seconds, or on another worker", s.cfg.QueueTimeout)}
		s.log.WarnContext(rctx, "request cut: it waited too long for a slot", "id", j.id, "retry_after", aerr.RetryAfter)
		worker.WriteError(w, aerr)
		return
	case cause == worker.ErrShutdown || cause == errRequestTimeout:
		// The tokens the client got: the backend's count may hold one
		// drawn as it was cancelled, never delivered.
		u.CompletionTokens = completed
		u.TotalTokens = u.PromptTokens + completed
		reason = s.cutShort(rctx, w, sse, j, cause, u, time.Since(start))
		return
	case !ok && ctx.Err() != nil:
		s.log.InfoContext(rctx, "request cancelled: the client went away", "id", j.id, "after", time.Since(start).Round(time.Millisecond))
		return
	}
	if !last.Done && last.Err == nil {
		last.Err = errors.New("the backend ended the stream without a final event")
	}
	if !ok {
		reason = "error"
		aerr := endError(last)
		s.log.ErrorContext(rctx, "generation failed", "id", j.id, "finish_reason", last.FinishReason, "err", last.Err)
		if sse == nil {
			worker.WriteError(w, aerr)
		} else {
			sse.Send(map[string]*worker.Error{"error": aerr})
			sse.Done()
		}
		return
	}
	if st, ok := j.format.(settler); ok {
		var aerr *worker.Error
		if finish, aerr = st.settle(text.String(), finish); aerr != nil {
			reason = "error"
			s.log.ErrorContext(rctx, "the output is not what the request asked", "id", j.id, "err", aerr.Message)
			if sse == nil {
				worker.WriteError(w, aerr)
			} else if sse.Send(map[string]*worker.Error{"error": aerr}) == nil && sse.Send(j.format.final(finishError, u)) == nil {
				sse.Done()
			}
			return
		}
	}
	reason = finish // the answer is whole: a client that stops reading it now has it all but [DONE]
	if !j.stream {
		rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		worker.WriteJSON(w, http.StatusOK, j.format.whole(text.String(), finish, u))
	} else {
		if stream().Send(j.format.final(finish, u)) != nil {
			return
		}
		if j.includeUsage && sse.Send(j.format.usageOnly(u)) != nil {
			return
		}
		sse.Done()
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
	s.log.InfoContext(rctx, "generation done", attrs...)
}

// cutShort answers a generation the worker cut (the shutdown, the
// request's deadline). A stream under way gets an error event, a final
// chunk whose finish_reason says why ("shutdown", "timeout") and [DONE]:
// a client that reads errors stops at the first, one that reads only
// finish_reason still sees that the answer is not whole. A request that
// has no stream open gets the error with its status: 503 for the
// shutdown, 504 for the deadline. It returns the finish reason.
func (s *Server) cutShort(ctx context.Context, w http.ResponseWriter, sse *worker.SSE, j *job, cause error, u usage, after time.Duration) string {
	finish := finishTimeout
	aerr := &worker.Error{Status: http.StatusGatewayTimeout, Type: "server_error", Code: worker.Str("request_timeout"),
		Message: fmt.Sprintf("the generation was cut after %v (the worker's -request-timeout): ask for fewer tokens", s.cfg.RequestTimeout)}
	if cause == worker.ErrShutdown {
		s.gate.CountCut()
		finish = finishShutdown
		aerr = &worker.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: worker.Str("shutdown"),
			Message: "the generation was cut: the worker shut down before it ended; send the request to another worker"}
	}
	s.log.WarnContext(ctx, "request cut", "id", j.id, "finish_reason", finish, "completion_tokens", u.CompletionTokens, "after", after.Round(time.Millisecond))
	if sse == nil {
		worker.WriteError(w, aerr)
		return finish
	}
	if sse.Send(map[string]*worker.Error{"error": aerr}) == nil && sse.Send(j.format.final(finish, u)) == nil &&
		(!j.includeUsage || sse.Send(j.format.usageOnly(u)) == nil) {
		sse.Done()
	}
	return finish
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
