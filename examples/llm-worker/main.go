// Command llm-worker serves a Llama-family model from a Hugging Face model
// folder over HTTP in OpenAI's format (completions and chat completions,
// plain or streamed as server-sent events), on an AMD GPU, an NVIDIA GPU
// through HIP's NVIDIA platform, or the CPU. It is a worker of the rbee
// contract: it can report to a hive with heartbeats, and it takes a bearer
// token from LLORCH_API_TOKEN.
//
//	llm-worker -model ~/models/Llama-3.2-1B-Instruct [-port 8080] [-device auto|cpu|hip:N] [-dtype auto|bf16|f16|f32]
//	           [-worker-id id -hive-url http://hive:7833 -model-ref ref]
//
// See README.md for the endpoints and examples.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/generate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &app{stderr: os.Stderr, getenv: os.Getenv, open: openBackend, heartbeatEvery: 30 * time.Second, signalsHandled: stop}
	os.Exit(a.run(ctx, os.Args[1:]))
}

// app is one run of the worker, with what tests replace.
type app struct {
	stderr         io.Writer
	getenv         func(string) string
	open           OpenFunc
	heartbeatEvery time.Duration
	onListen       func(net.Addr) // tests learn the port here
	signalsHandled func()         // called once shutdown begins: a second signal then kills
}

// config is the checked flags.
type config struct {
	workerID, modelDir, modelRef, host, hiveURL string
	port                                        int
	device, dtype                               string
	maxBatch, maxQueue, maxTokensDefault        int
	shutdownTimeout                             time.Duration
	readTimeout, requestTimeout, queueTimeout   time.Duration
	verbose                                     bool

	weightBytes int64 // of the model's safetensors files
	weightFiles int
}

// parseFlags reads and checks the flags; flag.ErrHelp for -h.
func parseFlags(args []string, out io.Writer) (*config, error) {
	fs := flag.NewFlagSet("llm-worker", flag.ContinueOnError)
	fs.SetOutput(out)
	c := &config{}
	fs.StringVar(&c.modelDir, "model", "", "the model: a Hugging Face model folder (config.json, tokenizer.json, *.safetensors) or a GGUF file (*.gguf)")
	fs.StringVar(&c.modelRef, "model-ref", "", "the model's name for clients and the hive (default: the folder's name)")
	fs.StringVar(&c.workerID, "worker-id", "", "this worker's id in heartbeats (default: llm-worker-<host>-<port>)")
	fs.StringVar(&c.host, "host", "0.0.0.0", "the address to listen on")
	fs.IntVar(&c.port, "port", 8080, "the port to listen on (0: any free port)")
	fs.StringVar(&c.hiveURL, "hive-url", "", "the hive to send heartbeats to (a URL without a path posts to its /v1/heartbeat)")
	fs.StringVar(&c.device, "device", "auto", "the device: auto (the GPU when there is one), cpu, or hip:N")
	rocmDevice := fs.Int("rocm-device", -1, "the GPU ordinal: the same as -device hip:N")
	fs.StringVar(&c.dtype, "dtype", "auto", "the weights' dtype: auto (the model's own on a GPU), bf16, f16 or f32")
	fs.IntVar(&c.maxBatch, "max-batch", 0, "the most sequences decoded together (0: the engine chooses)")
	fs.IntVar(&c.maxQueue, "max-queue", 0, "the most requests waiting for a slot before 429 (0: the engine chooses)")
	fs.IntVar(&c.maxTokensDefault, "max-tokens-default", 512, "max_tokens of a request that gives none")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long the requests under way may take to finish before they are cut (exit status 3)")
	fs.DurationVar(&c.readTimeout, "read-timeout", 30*time.Second, "how long a request's body may take to arrive before a 408 (0: no limit)")
	fs.DurationVar(&c.requestTimeout, "request-timeout", 0, "how long a generation may run before it is cut (finish_reason \"timeout\", or a 504; 0: no limit)")
	fs.DurationVar(&c.queueTimeout, "queue-timeout", 60*time.Second, "how long a request may wait for its first token before a 503 with Retry-After (0: no limit)")
	fs.BoolVar(&c.verbose, "v", false, "log debug messages too")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: llm-worker -model DIR|FILE.gguf [flags]\n\n"+
			"Serves a Llama-family model over HTTP in OpenAI's format (see README.md).\n"+
			"LLORCH_API_TOKEN, when set, is the bearer token every endpoint but GET /health, /ready and /live wants.\n"+
			"Exit status: 0 after a clean shutdown, 1 on a failure, 2 for bad flags, 3 when the shutdown cut requests\n"+
			"still running at -shutdown-timeout.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: every setting is a flag (see -h)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	if c.device, err = resolveDevice(c.device, set["device"], *rocmDevice, set["rocm-device"]); err != nil {
		return nil, err
	}
	if c.dtype, err = resolveDType(c.dtype); err != nil {
		return nil, err
	}
	switch {
	case c.port < 0 || c.port > 65535:
		return nil, fmt.Errorf("-port %d: want 0 to 65535", c.port)
	case c.maxBatch < 0:
		return nil, fmt.Errorf("-max-batch %d: want 0 (the engine chooses) or more", c.maxBatch)
	case c.maxQueue < 0:
		return nil, fmt.Errorf("-max-queue %d: want 0 (the engine chooses) or more", c.maxQueue)
	case c.maxTokensDefault < 1:
		return nil, fmt.Errorf("-max-tokens-default %d: want at least 1", c.maxTokensDefault)
	}
	for name, d := range map[string]time.Duration{"shutdown-timeout": c.shutdownTimeout, "read-timeout": c.readTimeout,
		"request-timeout": c.requestTimeout, "queue-timeout": c.queueTimeout} {
		if d < 0 {
			return nil, fmt.Errorf("-%s %v: want 0 or more (see -h)", name, d)
		}
	}
	if c.hiveURL != "" {
		if c.hiveURL, err = heartbeatURL(c.hiveURL); err != nil {
			return nil, err
		}
	}
	if c.modelDir == "" {
		return nil, errors.New("-model is missing: give a Hugging Face model folder (config.json, tokenizer.json, *.safetensors) or a GGUF file")
	}
	if c.weightBytes, c.weightFiles, err = inspectModel(c.modelDir); err != nil {
		return nil, err
	}
	if c.modelRef == "" {
		c.modelRef = strings.TrimSuffix(filepath.Base(filepath.Clean(c.modelDir)), ".gguf")
	}
	return c, nil
}

// resolveDevice merges -device and -rocm-device into "auto", "cpu" or
// "hip:N".
func resolveDevice(device string, deviceSet bool, rocm int, rocmSet bool) (string, error) {
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

// resolveDType checks -dtype.
func resolveDType(dtype string) (string, error) {
	switch d := strings.ToLower(strings.TrimSpace(dtype)); d {
	case "auto", "f32", "f16", "bf16":
		return d, nil
	case "float32":
		return "f32", nil
	case "float16", "half":
		return "f16", nil
	case "bfloat16":
		return "bf16", nil
	}
	return "", fmt.Errorf("-dtype %q: want auto, bf16, f16 or f32", dtype)
}

// inspectModel checks that dir is a model folder and sums its weights.
func inspectModel(dir string) (bytes int64, files int, err error) {
	st, err := os.Stat(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("-model: %v", err)
	}
	if !st.IsDir() {
		if f, _ := models.Detect(dir); f == models.GGUF {
			return st.Size(), 1, nil
		}
		return 0, 0, fmt.Errorf("-model %s is a file but not a .gguf: give a GGUF file or the model's folder (config.json, tokenizer.json, *.safetensors)", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		return 0, 0, fmt.Errorf("-model %s has no config.json: give a Hugging Face model folder", dir)
	}
	shards, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return 0, 0, fmt.Errorf("-model %s: %v", dir, err)
	}
	if len(shards) == 0 {
		return 0, 0, fmt.Errorf("-model %s has no *.safetensors weights", dir)
	}
	for _, s := range shards {
		st, err := os.Stat(s)
		if err != nil {
			return 0, 0, fmt.Errorf("-model: %v", err)
		}
		bytes += st.Size()
	}
	return bytes, len(shards), nil
}

// version is the worker's build: the module version, else the VCS
// revision, else "devel".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// run is the worker's life: flags, listen, load, warm up, serve, drain.
// It returns the exit status: 2 for bad flags, 1 for a failure, 0 after a
// clean shutdown, exitCut after a shutdown that cut requests.
func (a *app) run(ctx context.Context, args []string) int {
	cfg, err := parseFlags(args, a.stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(a.stderr, "llm-worker:", err)
		return 2
	}
	level := slog.LevelInfo
	if cfg.verbose {
		level = slog.LevelDebug
	}
	logHandler := slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level})
	log := slog.New(logHandler)
	ver := version()

	token := strings.TrimSpace(a.getenv("LLORCH_API_TOKEN")) // as read from a file, with its newline
	srv := NewServer(ServerConfig{ModelID: cfg.modelRef, Version: ver, MaxTokensDefault: cfg.maxTokensDefault, APIToken: token, Logger: log,
		ReadTimeout: cfg.readTimeout, RequestTimeout: cfg.requestTimeout, QueueTimeout: cfg.queueTimeout})
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port)))
	if err != nil {
		log.Error("cannot listen", "err", err)
		return 1
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if cfg.workerID == "" {
		host, _ := os.Hostname()
		cfg.workerID = fmt.Sprintf("llm-worker-%s-%d", host, port)
	}
	// Requests live in baseCtx: cancelling it ends the handlers that the
	// drain has not ended (a body still arriving).
	baseCtx, cancelRequests := context.WithCancel(context.Background())
	defer cancelRequests()
	// No ReadTimeout: it would cut streams; the server bounds each body.
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(logHandler, slog.LevelDebug),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	if a.onListen != nil {
		a.onListen(ln.Addr())
	}
	auth := "bearer token (LLORCH_API_TOKEN)"
	if token == "" {
		auth = "none"
		if ip := net.ParseIP(cfg.host); ip == nil || !ip.IsLoopback() {
			log.Warn("LLORCH_API_TOKEN is not set: anyone who reaches this port can use the model")
		}
	}
	log.Info("listening", "addr", ln.Addr().String(), "worker_id", cfg.workerID, "model", cfg.modelRef, "auth", auth, "version", ver)

	var device atomic.Value // for heartbeats: the flag's until the model says
	device.Store(hiveDevice(cfg.device))
	var hb *Heartbeat
	hbCtx, stopHeartbeat := context.WithCancel(context.Background())
	defer stopHeartbeat()
	if cfg.hiveURL != "" {
		hb = &Heartbeat{URL: cfg.hiveURL, Interval: a.heartbeatEvery, Logger: log, Payload: func() HeartbeatPayload {
			return HeartbeatPayload{WorkerID: cfg.workerID, Model: cfg.modelRef, Device: device.Load().(string), Port: port,
				Status: srv.Status(), Implementation: implementation, Version: ver}
		}}
		hb.Start(hbCtx)
		log.Info("heartbeats", "url", cfg.hiveURL, "every", a.heartbeatEvery)
	}
	// drain ends the worker: refuse new work (the listener stays open: new
	// requests and probes get 503 "draining"), tell the hive, let what is
	// under way finish within the timeout, then cut it. It returns how many
	// requests it cut.
	drain := func(b Backend) int {
		if a.signalsHandled != nil {
			a.signalsHandled()
		}
		srv.Drain()
		if hb != nil {
			stopHeartbeat()
			hb.Wait()
			bctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := hb.Beat(bctx); err != nil {
				log.Warn("last heartbeat failed", "err", err)
			}
			cancel()
		}
		log.Info("shutting down: finishing the requests under way", "in_flight", srv.InFlight(), "timeout", cfg.shutdownTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
		cut := srv.Shutdown(sctx)
		cancel()
		if cut > 0 {
			log.Warn("shutdown timeout: the requests under way were cut", "cut", cut)
		}
		sctx, cancel = context.WithTimeout(context.Background(), closeGrace)
		if hs.Shutdown(sctx) != nil {
			cancelRequests()
			hs.Close()
		}
		cancel()
		if b != nil {
			if err := b.Close(); err != nil {
				log.Warn("closing the model", "err", err)
			}
		}
		log.Info("stopped", "cut", cut)
		return cut
	}

	log.Info("loading the model", "dir", cfg.modelDir, "weights", humanize.IBytes(uint64(cfg.weightBytes)), "files", cfg.weightFiles,
		"device", cfg.device, "dtype", cfg.dtype)
	bar := NewProgressBar(a.stderr, "loading weights")
	type loaded struct {
		b   Backend
		err error
	}
	loadDone := make(chan loaded, 1)
	start := time.Now()
	go func() {
		b, err := a.open(LoadOptions{Dir: cfg.modelDir, Device: cfg.device, DType: cfg.dtype, MaxBatch: cfg.maxBatch,
			MaxQueue: cfg.maxQueue, Progress: bar.Update})
		loadDone <- loaded{b, err}
	}()
	var b Backend
	select {
	case <-ctx.Done():
		bar.Finish()
		log.Warn("interrupted while loading the model")
		drain(nil)
		return 1
	case l := <-loadDone:
		bar.Finish()
		if l.err != nil {
			log.Error("loading the model failed", "err", l.err)
			drain(nil)
			return 1
		}
		b = l.b
	}
	took := time.Since(start)
	info := b.Info()
	device.Store(hiveDevice(info.Device))
	log.Info("model loaded", "took", took.Round(time.Millisecond), "device", info.Device, "dtype", info.DType,
		"rate", humanize.IBytes(uint64(float64(cfg.weightBytes)/max(took.Seconds(), 1e-9)))+"/s",
		"device_memory", humanize.IBytes(uint64(info.DeviceMemory)), "kv_cache", fmt.Sprintf("%s tokens", humanize.Comma(int64(info.CacheTokens))),
		"context", b.ContextLength(), "vocab", b.VocabSize())
	if err := warmUp(ctx, b, log); err != nil {
		if ctx.Err() != nil {
			log.Warn("interrupted during the warm-up")
		} else {
			log.Error("warm-up failed", "err", err)
		}
		drain(b)
		return 1
	}
	srv.SetReady(b)
	if hb != nil {
		hb.Kick()
	}
	log.Info("ready", "url", fmt.Sprintf("http://%s", ln.Addr()), "model", cfg.modelRef)

	code := 0
	select {
	case <-ctx.Done():
		log.Info("signal received")
	case err := <-serveErr:
		log.Error("serving failed", "err", err)
		code = 1
	}
	if drain(b) > 0 && code == 0 {
		code = exitCut
	}
	return code
}

// exitCut is the exit status of a shutdown that cut requests: a
// supervisor can tell it from a clean one (0) and from a failure (1).
const exitCut = 3

// closeGrace bounds, once the generations have ended, the requests still
// arriving when the listener closes.
const closeGrace = 5 * time.Second

// warmUp generates a few tokens once, so that the first client does not
// pay for compiling kernels and capturing graphs.
func warmUp(ctx context.Context, b Backend, log *slog.Logger) error {
	start := time.Now()
	ids, err := b.Encode("Hello", true)
	if err != nil {
		return err
	}
	if len(ids) == 0 || len(ids) >= b.ContextLength() {
		return fmt.Errorf("the warm-up prompt is %d tokens for a context of %d", len(ids), b.ContextLength())
	}
	events, err := b.Generate(ctx, generate.Request{Prompt: ids, MaxTokens: min(8, b.ContextLength()-len(ids))})
	if err != nil {
		return err
	}
	var last generate.Event
	for ev := range events {
		if ev.Done || ev.Err != nil {
			last = ev
		}
	}
	if last.Err != nil {
		return last.Err
	}
	if !last.Done {
		return errors.New("the generation ended without a final event")
	}
	if last.FinishReason != "stop" && last.FinishReason != "length" {
		return fmt.Errorf("the generation ended with %q", last.FinishReason)
	}
	log.Info("warm-up done", "tokens", last.CompletionTokens, "took", time.Since(start).Round(time.Millisecond))
	return nil
}
