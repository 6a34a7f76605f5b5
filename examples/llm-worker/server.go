package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/generate/grammar"
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
	fp      string // system_fingerprint: the worker's version and model
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
	s := &Server{cfg: cfg, log: log, created: time.Now().Unix(), fp: fingerprint(cfg.Version, cfg.ModelID), gate: worker.NewGate(cfg.Logger)}
	s.metrics = newMetrics(s)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.health)
	mux.HandleFunc("/ready", s.gate.ReadyHandler)
	mux.HandleFunc("/live", s.gate.LiveHandler)
	mux.Handle("/metrics", s.metrics.reg)
	mux.HandleFunc("/v1/models", s.models)
	mux.HandleFunc("/v1/models/{id...}", s.model)
	mux.HandleFunc("/tokenize", s.tokenize)
	mux.HandleFunc("/detokenize", s.detokenize)
	mux.HandleFunc("/v1/completions", s.completions)
	mux.HandleFunc("/v1/chat/completions", s.chatCompletions)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		worker.WriteError(w, &worker.Error{Status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("no endpoint %s %s: this worker serves GET /health, GET /ready, GET /live, GET /metrics, GET /v1/models, GET /v1/models/{id}, POST /v1/completions, POST /v1/chat/completions, POST /tokenize and POST /detokenize", r.Method, r.URL.Path)})
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
	worker.WriteJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{s.card()}})
}

// card is the model this worker serves.
func (s *Server) card() modelCard {
	card := modelCard{ID: s.cfg.ModelID, Object: "model", Created: s.created, OwnedBy: "rocm-go"}
	if b, err := s.current(); err == nil {
		card.MaxModelLen = b.ContextLength()
	}
	return card
}

// job is a checked generation request.
type job struct {
	id           string
	req          generate.Request
	n            int    // the choices: sequences of the same prompt
	maxParam     string // the parameter that set req.MaxTokens
	stream       bool
	includeUsage bool
	format       formatter
}

// settler is a formatter that reads a choice's output (its tool calls)
// and settles it once the choice finished: see toolFormat.settle.
type settler interface {
	settle(index int, text, finish string) (string, *worker.Error)
}

// formatter makes one endpoint's response objects; index is a choice's.
type formatter interface {
	first(index int) any                                           // a choice's opening chunk in a stream, or nil
	chunk(index int, text string, lps []generate.TokenLogProb) any // a stream chunk with new text or log-probabilities
	final(index int, finish string) any                            // a choice's closing chunk
	usageOnly(u usage) any                                         // the stream_options.include_usage chunk
	whole(choices []choiceOut, u usage) any                        // the non-streamed response
}

// choiceOut is a choice of a non-streamed response.
type choiceOut struct {
	text, finish string
	lps          []generate.TokenLogProb
}

// choiceEvent is an event of choice index.
type choiceEvent struct {
	index int
	ev    generate.Event
}

// mergeChoices interleaves the choices' streams in the order their events
// come; the result closes once every stream has.
func mergeChoices(chans []<-chan generate.Event) <-chan choiceEvent {
	out := make(chan choiceEvent)
	var wg sync.WaitGroup
	for i, ch := range chans {
		wg.Go(func() {
			for ev := range ch {
				out <- choiceEvent{i, ev}
			}
		})
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return out
}

// submit starts a job's n sequences, the prompt the same for each (so
// that they share its KV-cache blocks where the cache can), choice i
// drawing with the seed plus i when a seed is given. A refusal cancels
// and drains the sequences already started.
func submit(ctx context.Context, cancel context.CancelCauseFunc, b Backend, j *job) (<-chan choiceEvent, error) {
	chans := make([]<-chan generate.Event, j.n)
	for i := range j.n {
		r := j.req
		if r.Sampling.Seed != 0 {
			r.Sampling.Seed += uint64(i)
		}
		if m, ok := r.Constraint.(*grammar.Matcher); ok && i > 0 {
			r.Constraint = m.Clone() // a matcher follows one sequence
		}
		ch, err := b.Generate(ctx, r)
		if err != nil {
			cancel(nil)
			for _, c := range chans[:i] {
				for range c {
				}
			}
			return nil, err
		}
		chans[i] = ch
	}
	return mergeChoices(chans), nil
}

// common checks the fields both endpoints share once the prompt's tokens
// are known, and fills the engine request; what the request asks of the
// model (token ids, the context) generate.Check judges when the engine
// takes it.
func (s *Server) common(b Backend, p *samplingParams, ids []int32, chat bool) (*job, *worker.Error) {
	maxTok, maxParam, aerr := p.maxTokens(len(ids), b.ContextLength(), s.cfg.MaxTokensDefault)
	if aerr != nil {
		return nil, aerr
	}
	n, aerr := p.choices()
	if aerr != nil {
		return nil, aerr
	}
	lpOn, lpTop, aerr := p.logprobs(chat)
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
	j := &job{req: generate.Request{Prompt: ids, MaxTokens: maxTok, Sampling: smp, StopTokens: b.EOS(), StopStrings: stop, LogProbs: lpOn, TopLogProbs: lpTop},
		n: n, maxParam: maxParam, stream: p.Stream, includeUsage: p.StreamOptions != nil && p.StreamOptions.IncludeUsage}
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
	b, req, ok := readPost[R](s, w, r)
	if !ok {
		return
	}
	j, aerr := makeJob(b, req)
	if aerr != nil {
		worker.WriteError(w, aerr)
		return
	}
	s.generate(w, r, b, j)
}

// readPost reads a POST body as a request R once the model has loaded;
// on failure it has answered and ok is false.
func readPost[R any](s *Server, w http.ResponseWriter, r *http.Request) (_ Backend, _ *R, ok bool) {
	if r.Method != http.MethodPost {
		worker.MethodNotAllowed(w, r, "POST")
		return nil, nil, false
	}
	b, aerr := s.current()
	if aerr != nil {
		worker.WriteError(w, aerr)
		return nil, nil, false
	}
	var req R
	if aerr := worker.DecodeJSON(w, r, s.cfg.MaxBodyBytes, &req); aerr != nil {
		worker.WriteError(w, aerr)
		return nil, nil, false
	}
	return b, &req, true
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
	j, aerr := s.common(b, &req.samplingParams, ids, false)
	if aerr != nil {
		return nil, aerr
	}
	j.id = worker.NewID("cmpl-")
	j.format = &completionFormat{s.responseMeta(j, b)}
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
	j, aerr := s.common(b, &req.samplingParams, ids, true)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := s.constrainToolCall(b, &j.req, ts); aerr != nil {
		return nil, aerr
	}
	j.id = worker.NewID("chatcmpl-")
	j.format = newToolFormat(&chatFormat{s.responseMeta(j, b)}, ts, req.Stream, j.n)
	return j, nil
}

// fieldParams name the OpenAI parameter behind each field of
// generate.Request that generate.Check may refuse.
var fieldParams = map[string]string{
	"Prompt": "prompt", "StopStrings": "stop", "Sampling.Temperature": "temperature", "Sampling.TopP": "top_p",
	"Sampling.TopK": "top_k", "Sampling.MinP": "min_p", "Sampling.RepetitionPenalty": "repetition_penalty",
	"Sampling.PresencePenalty": "presence_penalty", "Sampling.FrequencyPenalty": "frequency_penalty",
	"Sampling.LogitBias": "logit_bias", "TopLogProbs": "top_logprobs",
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
	events, err := submit(ctx, cancel, b, j)
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
		for range events { // the backend ends the channels once cancelled
		}
	}()
	var (
		out       = make([]choiceOut, j.n) // finish "" while a choice runs
		open      = j.n
		firstAt   time.Duration
		completed int
		u         = usage{PromptTokens: len(j.req.Prompt)} // counted once, whatever n
		last      generate.Event                           // the event that ended the loop
		settled   string                                   // the finish reason of the last choice to end, settled
		cached    int                                      // the prompt's tokens read from the prefix cache
		cause     error                                    // why the worker cut the generation
	)
	rc := http.NewResponseController(w)
	var sse *worker.SSE
	stream := func() *worker.SSE {
		if sse == nil {
			sse = worker.NewSSE(w, rc, s.cfg.WriteTimeout)
			for i := range j.n {
				if f := j.format.first(i); f != nil {
					sse.Send(f) // a failure stays in sse: every later send fails
				}
			}
		}
		return sse
	}
	for ce := range events {
		ev, c := ce.ev, &out[ce.index]
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
		if ev.Text != "" || len(ev.LogProbs) > 0 {
			if !j.stream {
				c.text += ev.Text
				c.lps = append(c.lps, ev.LogProbs...)
			} else if ch := j.format.chunk(ce.index, ev.Text, ev.LogProbs); ch == nil {
				// held back: it may be a tool call
			} else if err := stream().Send(ch); err != nil {
				s.log.InfoContext(rctx, "request cancelled: the client stopped reading", "id", j.id, "err", err)
				return
			}
		}
		if !ev.Done && ev.Err == nil {
			continue
		}
		last = ev
		fin, ok := finished(ev)
		if !ok || !ev.Done {
			break // the whole request fails with the choice
		}
		if st, ok := j.format.(settler); ok {
			var aerr *worker.Error
			if fin, aerr = st.settle(ce.index, c.text, fin); aerr != nil {
				reason = "error"
				s.log.ErrorContext(rctx, "the output is not what the request asked", "id", j.id, "choice", ce.index, "err", aerr.Message)
				if sse == nil { // nothing sent yet (a stream held it back): a plain error
					worker.WriteError(w, aerr)
				} else if sse.Send(map[string]*worker.Error{"error": aerr}) == nil && sse.Send(j.format.final(ce.index, finishError)) == nil {
					sse.Done()
				}
				return
			}
		}
		c.finish, settled = fin, fin
		u.CompletionTokens += ev.CompletionTokens
		cached = max(cached, ev.CachedTokens) // of the one prompt: the choices' best
		if j.stream && stream().Send(j.format.final(ce.index, fin)) != nil {
			return
		}
		if open--; open == 0 {
			break
		}
	}
	if tm.cached = cached; cached > 0 {
		u.PromptTokensDetails = &promptTokensDetails{CachedTokens: cached}
	}
	if u.CompletionTokens == 0 {
		u.CompletionTokens = completed
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	_, ok := finished(last)
	ok = ok && last.Done && open == 0 // not a generation the queue wait cut before its first event
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
		reason = s.cutShort(rctx, w, sse, j, cause, u, out, time.Since(start))
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
	finish := settled // a choice that called tools says "tool_calls"
	reason = finish   // the answer is whole: a client that stops reading it now has it all but [DONE]
	if !j.stream {
		rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		worker.WriteJSON(w, http.StatusOK, j.format.whole(out, u))
	} else {
		if j.includeUsage && stream().Send(j.format.usageOnly(u)) != nil {
			return
		}
		stream().Done()
	}
	took := time.Since(start)
	attrs := []any{"id", j.id, "prompt_tokens", u.PromptTokens, "completion_tokens", u.CompletionTokens,
		"finish_reason", finish, "stream", j.stream, "took", took.Round(time.Millisecond)}
	if j.n > 1 {
		attrs = append(attrs, "n", j.n)
	}
	if firstAt > 0 {
		attrs = append(attrs, "first_token", firstAt.Round(time.Millisecond))
		if u.CompletionTokens > j.n && took > firstAt {
			attrs = append(attrs, "tokens_per_s", fmt.Sprintf("%.1f", float64(u.CompletionTokens-j.n)/(took-firstAt).Seconds()))
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
func (s *Server) cutShort(ctx context.Context, w http.ResponseWriter, sse *worker.SSE, j *job, cause error, u usage, out []choiceOut, after time.Duration) string {
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
	if sse.Send(map[string]*worker.Error{"error": aerr}) != nil {
		return finish
	}
	for i, c := range out {
		if c.finish == "" && sse.Send(j.format.final(i, finish)) != nil {
			return finish
		}
	}
	if !j.includeUsage || sse.Send(j.format.usageOnly(u)) == nil {
		sse.Done()
	}
	return finish
}

// responseMeta is what every object of a response carries, and its
// log-probabilities' maker (nil when not asked for).
type responseMeta struct {
	id, model, fingerprint string
	created                int64
	lp                     *logprobs
}

// responseMeta is a job's, once its id is set.
func (s *Server) responseMeta(j *job, b Backend) responseMeta {
	return responseMeta{id: j.id, model: s.cfg.ModelID, fingerprint: s.fp, created: time.Now().Unix(),
		lp: newLogprobs(j.req.LogProbs, j.req.TopLogProbs, j.n, b.TokenBytes)}
}

// completionFormat makes /v1/completions' objects.
type completionFormat struct{ responseMeta }

func (f *completionFormat) obj(choices []completionChoice, u *usage) completionResponse {
	return completionResponse{ID: f.id, Object: "text_completion", Created: f.created, Model: f.model, SystemFingerprint: f.fingerprint, Choices: choices, Usage: u}
}

func (f *completionFormat) first(int) any { return nil }
func (f *completionFormat) chunk(index int, text string, lps []generate.TokenLogProb) any {
	return f.obj([]completionChoice{{Index: index, Text: text, Logprobs: f.lp.completion(index, lps)}}, nil)
}
func (f *completionFormat) final(index int, finish string) any {
	return f.obj([]completionChoice{{Index: index, FinishReason: &finish}}, nil)
}
func (f *completionFormat) usageOnly(u usage) any { return f.obj([]completionChoice{}, &u) }
func (f *completionFormat) whole(out []choiceOut, u usage) any {
	choices := make([]completionChoice, len(out))
	for i, c := range out {
		choices[i] = completionChoice{Index: i, Text: c.text, Logprobs: f.lp.completion(i, c.lps), FinishReason: &c.finish}
	}
	return f.obj(choices, &u)
}

// chatFormat makes /v1/chat/completions' objects.
type chatFormat struct{ responseMeta }

func (f *chatFormat) obj(object string, choices []chatChoice, u *usage) chatResponse {
	return chatResponse{ID: f.id, Object: object, Created: f.created, Model: f.model, SystemFingerprint: f.fingerprint, Choices: choices, Usage: u}
}

func (f *chatFormat) first(index int) any {
	empty := ""
	return f.obj("chat.completion.chunk", []chatChoice{{Index: index, Delta: &chatMessageOut{Role: "assistant", Content: &empty}}}, nil)
}
func (f *chatFormat) chunk(index int, text string, lps []generate.TokenLogProb) any {
	return f.obj("chat.completion.chunk", []chatChoice{{Index: index, Delta: &chatMessageOut{Content: &text}, Logprobs: f.lp.chat(lps)}}, nil)
}
func (f *chatFormat) final(index int, finish string) any {
	return f.obj("chat.completion.chunk", []chatChoice{{Index: index, Delta: &chatMessageOut{}, FinishReason: &finish}}, nil)
}
func (f *chatFormat) usageOnly(u usage) any {
	return f.obj("chat.completion.chunk", []chatChoice{}, &u)
}
func (f *chatFormat) whole(out []choiceOut, u usage) any {
	choices := make([]chatChoice, len(out))
	for i, c := range out {
		text := c.text
		choices[i] = chatChoice{Index: i, Message: &chatMessageOut{Role: "assistant", Content: &text}, Logprobs: f.lp.chat(c.lps), FinishReason: &c.finish}
	}
	return f.obj("chat.completion", choices, &u)
}
