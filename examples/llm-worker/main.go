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
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/internal/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &app{stderr: os.Stderr, getenv: os.Getenv, open: openBackend, signalsHandled: stop}
	os.Exit(a.run(ctx, os.Args[1:]))
}

// app is one run of the worker, with what tests replace.
type app struct {
	stderr         io.Writer
	getenv         func(string) string
	open           OpenFunc
	onListen       func(net.Addr) // tests learn the port here
	signalsHandled func()         // called once shutdown begins: a second signal then kills
}

// config is the checked flags.
type config struct {
	workerID, modelDir, modelRef, host, hiveURL string
	port                                        int
	device, dtype                               string
	maxBatch, maxQueue, maxTokensDefault        int
	maxModelLen                                 int
	tensorParallel                              int
	kvCacheBytes                                int64
	memoryFraction                              float64
	noPrefixCaching                             bool
	speculativeTokens                           int
	shutdownTimeout, heartbeatEvery             time.Duration
	readTimeout, requestTimeout, queueTimeout   time.Duration
	logFormat                                   string
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
	fs.DurationVar(&c.heartbeatEvery, "heartbeat-interval", 30*time.Second, "how often to send a heartbeat to the hive (besides at each change of state)")
	fs.StringVar(&c.device, "device", "auto", "the device: auto (the GPU when there is one), cpu, or hip:N")
	rocmDevice := fs.Int("rocm-device", -1, "the GPU ordinal: the same as -device hip:N")
	fs.IntVar(&c.tensorParallel, "tensor-parallel", 1, "the devices one model is split over (tensor parallelism): the GPUs from -device's on (hip:0 and hip:1 for 2), or as many CPU ranks on -device cpu")
	fs.StringVar(&c.dtype, "dtype", "auto", "the weights' dtype: auto (the model's own on a GPU), bf16, f16 or f32")
	fs.IntVar(&c.maxBatch, "max-batch", 0, "the most sequences decoded together (0: the engine chooses)")
	fs.IntVar(&c.maxQueue, "max-queue", 0, "the most requests waiting for a slot before 429 (0: the engine chooses)")
	fs.IntVar(&c.maxModelLen, "max-model-len", 0, "the most tokens of a sequence, prompt and answer (0: the model's context); it also sizes the default KV cache")
	kvCache := fs.String("kv-cache-memory", "", "the KV cache's size, such as 4GiB (default: see -gpu-memory-utilization; on the CPU, four contexts within 1 GiB)")
	fs.Float64Var(&c.memoryFraction, "gpu-memory-utilization", 0, "the share of the GPU's memory the worker may hold, weights and KV cache together, in (0, 1] (0: the cache takes 80% of the memory the weights leave free)")
	prefixCaching := fs.Bool("prefix-caching", true, "keep the KV cache of prompts' whole pages for later requests that begin the same way (a system prompt, a chat's earlier turns), which then skip their prefill")
	fs.IntVar(&c.speculativeTokens, "speculative-tokens", 0, "prompt-lookup speculative decoding of greedy requests (temperature 0): up to this many tokens a step drafted from the request's own prompt and answer and checked in one pass; the answers do not change (0: off; 4 to 8 suit summaries and edits of a given text)")
	fs.IntVar(&c.maxTokensDefault, "max-tokens-default", 512, "max_tokens of a request that gives none")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long the requests under way may take to finish before they are cut (exit status 3)")
	fs.DurationVar(&c.readTimeout, "read-timeout", 30*time.Second, "how long a request's body may take to arrive before a 408 (0: no limit)")
	fs.DurationVar(&c.requestTimeout, "request-timeout", 0, "how long a generation may run before it is cut (finish_reason \"timeout\", or a 504; 0: no limit)")
	fs.DurationVar(&c.queueTimeout, "queue-timeout", 60*time.Second, "how long a request may wait for its first token before a 503 with Retry-After (0: no limit)")
	fs.StringVar(&c.logFormat, "log-format", "text", "the log's format: text (key=value) or json (one object a line)")
	fs.BoolVar(&c.verbose, "v", false, "log debug messages too (among them a line for each probe and scrape that succeeds)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: llm-worker -model DIR|FILE.gguf [flags]\n\n"+
			"Serves a Llama-family model over HTTP in OpenAI's format (see README.md).\n"+
			"LLORCH_API_TOKEN, when set, is the bearer token every endpoint but GET /health, /ready, /live and /metrics wants.\n"+
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
	c.noPrefixCaching = !*prefixCaching
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	if *kvCache != "" {
		n, perr := humanize.ParseBytes(*kvCache)
		if perr != nil || n == 0 || n > 1<<50 {
			return nil, fmt.Errorf("-kv-cache-memory %q: want a size such as 512MiB or 4GiB", *kvCache)
		}
		c.kvCacheBytes = int64(n)
	}
	if c.device, err = worker.ResolveDevice(c.device, set["device"], *rocmDevice, set["rocm-device"]); err != nil {
		return nil, err
	}
	if c.dtype, err = resolveDType(c.dtype); err != nil {
		return nil, err
	}
	if err := worker.CheckLogFormat(c.logFormat); err != nil {
		return nil, err
	}
	switch {
	case c.port < 0 || c.port > 65535:
		return nil, fmt.Errorf("-port %d: want 0 to 65535", c.port)
	case c.maxBatch < 0:
		return nil, fmt.Errorf("-max-batch %d: want 0 (the engine chooses) or more", c.maxBatch)
	case c.maxQueue < 0:
		return nil, fmt.Errorf("-max-queue %d: want 0 (the engine chooses) or more", c.maxQueue)
	case c.speculativeTokens < 0:
		return nil, fmt.Errorf("-speculative-tokens %d: want 0 (off) or more", c.speculativeTokens)
	case c.tensorParallel < 1:
		return nil, fmt.Errorf("-tensor-parallel %d: want 1 (one device) or more", c.tensorParallel)
	case c.maxModelLen < 0:
		return nil, fmt.Errorf("-max-model-len %d: want 0 (the model's context) or more", c.maxModelLen)
	case c.memoryFraction < 0 || c.memoryFraction > 1:
		return nil, fmt.Errorf("-gpu-memory-utilization %g: want a share in (0, 1], or 0 for the default", c.memoryFraction)
	case c.heartbeatEvery <= 0:
		return nil, fmt.Errorf("-heartbeat-interval %v: want more than 0", c.heartbeatEvery)
	case c.maxTokensDefault < 1:
		return nil, fmt.Errorf("-max-tokens-default %d: want at least 1", c.maxTokensDefault)
	}
	for name, d := range map[string]time.Duration{"shutdown-timeout": c.shutdownTimeout, "read-timeout": c.readTimeout,
		"request-timeout": c.requestTimeout, "queue-timeout": c.queueTimeout, "heartbeat-interval": c.heartbeatEvery} {
		if d < 0 {
			return nil, fmt.Errorf("-%s %v: want 0 or more (see -h)", name, d)
		}
	}
	if c.hiveURL != "" {
		if c.hiveURL, err = worker.HeartbeatURL(c.hiveURL); err != nil {
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
	logHandler, err := worker.NewLogHandler(a.stderr, cfg.logFormat, cfg.verbose)
	if err != nil {
		fmt.Fprintln(a.stderr, "llm-worker:", err)
		return 2
	}
	log := slog.New(logHandler)
	ver := worker.Version()

	token := strings.TrimSpace(a.getenv("LLORCH_API_TOKEN")) // as read from a file, with its newline
	srv := NewServer(ServerConfig{ModelID: cfg.modelRef, Version: ver, MaxTokensDefault: cfg.maxTokensDefault, APIToken: token, Logger: log,
		ReadTimeout: cfg.readTimeout, RequestTimeout: cfg.requestTimeout, QueueTimeout: cfg.queueTimeout})
	host, err := worker.Listen(worker.HostConfig{Name: "llm-worker", Host: cfg.host, Port: cfg.port, WorkerID: cfg.workerID, Model: cfg.modelRef,
		Device: cfg.device, HiveURL: cfg.hiveURL, HeartbeatEvery: cfg.heartbeatEvery, Load: srv.Load, ShutdownTimeout: cfg.shutdownTimeout, Token: token,
		Version: ver, Log: log, LogHandler: logHandler, OnListen: a.onListen, SignalsHandled: a.signalsHandled}, srv.Gate(), srv.Handler())
	if err != nil {
		log.Error(err.Error())
		return 1
	}
	log.Info("loading the model", "dir", cfg.modelDir, "weights", humanize.IBytes(uint64(cfg.weightBytes)), "files", cfg.weightFiles,
		"device", cfg.device, "tensor_parallel", cfg.tensorParallel, "dtype", cfg.dtype)
	bar := worker.NewProgressBar(a.stderr, "loading weights")
	if cfg.logFormat == "json" {
		bar.Log = log
	}
	return worker.Life[Backend]{Host: host, Gate: srv.Gate(),
		Load: func() (Backend, error) {
			return a.open(LoadOptions{Dir: cfg.modelDir, Device: cfg.device, TensorParallel: cfg.tensorParallel, DType: cfg.dtype, MaxBatch: cfg.maxBatch,
				MaxQueue: cfg.maxQueue, MaxModelLen: cfg.maxModelLen, CacheBytes: cfg.kvCacheBytes, MemoryFraction: cfg.memoryFraction,
				NoPrefixCaching: cfg.noPrefixCaching, SpeculativeTokens: cfg.speculativeTokens, Progress: bar.Update})
		},
		LoadDone: bar.Finish,
		Kernels: func(each func(worker.KernelModule)) error {
			return nn.WarmKernels(cfg.device, func(m candle.ModuleReady) { each(worker.KernelModule(m)) })
		},
		Loaded: func(b Backend, took time.Duration) {
			info := b.Info()
			// The hive's names of each device: "rocm:0,rocm:1" for a
			// model split over two GPUs.
			devs := strings.Split(info.Device, ",")
			for i, d := range devs {
				devs[i] = worker.HiveDevice(d)
			}
			host.SetDevice(strings.Join(devs, ","))
			// No rate here: the time covers the tokenizer and the KV cache
			// too, and the progress bar gave the weights'.
			log.Info("model loaded", "took", took.Round(time.Millisecond), "device", info.Device, "devices", max(info.Devices, 1), "dtype", info.DType, "weights", info.Weights,
				"device_memory", humanize.IBytes(uint64(info.DeviceMemory)), "kv_cache", fmt.Sprintf("%s tokens", humanize.Comma(int64(info.CacheTokens))),
				"context", b.ContextLength(), "vocab", b.VocabSize())
			if w, ok := b.(interface{ OnBroken(func(error)) }); ok {
				w.OnBroken(func(err error) {
					log.Error("the model broke: the worker takes no more requests", "err", err)
					srv.Gate().SetFailed("a device of the model failed: " + err.Error())
					host.Changed()
				})
			}
		},
		WarmUp: func(ctx context.Context, b Backend) error { return warmUp(ctx, b, log) },
		Ready:  srv.SetReady,
	}.Run(ctx)
}

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
