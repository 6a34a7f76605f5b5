// Command sd-worker serves a Stable Diffusion model (1.x, 2.x, XL or
// Turbo; a diffusers folder or a single-file checkpoint) over HTTP with
// the APIs image tools already speak: OpenAI's images API
// (/v1/images/generations, /v1/images/edits) and AUTOMATIC1111's
// (/sdapi/v1/txt2img, /img2img, /progress, ...), plus jobs with progress
// as server-sent events. Concurrent requests of the same size, steps and
// sampler share one UNet batch. It runs on an AMD GPU, an NVIDIA GPU
// through HIP's NVIDIA platform, or the CPU, and is a worker of the rbee
// contract: heartbeats to a hive, a bearer token from LLORCH_API_TOKEN.
//
//	sd-worker -model-path ~/models/stable-diffusion-v1-5 [-port 8081] [-device auto|cpu|hip:N] [-use-f16]
//	          [-worker-id id -hive-url http://hive:7833] [-callback-url URL] [-lora file.safetensors:0.8]
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd"
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
	onListen       func(net.Addr)
	signalsHandled func()
}

// config is the checked flags.
type config struct {
	workerID, modelPath, modelRef, tokenizer, sdVersion string
	host, hiveURL, callbackURL, device, dtype           string
	logFormat                                           string
	port                                                int
	loras                                               []sd.LoRA
	maxSize, maxSteps, maxImages, maxBatch, maxQueue    int
	shutdownTimeout, readTimeout, heartbeatEvery        time.Duration
	graphs, verbose                                     bool
}

// loraFlags is -lora, repeatable: file[:scale].
type loraFlags []sd.LoRA

func (l *loraFlags) String() string { return fmt.Sprint(*l) }
func (l *loraFlags) Set(v string) error {
	path, scale := v, 1.0
	if i := strings.LastIndex(v, ":"); i > 0 {
		if f, err := strconv.ParseFloat(v[i+1:], 64); err == nil {
			path, scale = v[:i], f
		}
	}
	if st, err := os.Stat(path); err != nil || st.IsDir() {
		return fmt.Errorf("%s: not a LoRA file (want file.safetensors[:scale])", path)
	}
	*l = append(*l, sd.LoRA{Path: path, Scale: scale})
	return nil
}

// versions are -sd-version's values.
var versions = []string{"v1-5", "v2-1", "xl", "turbo"}

// parseFlags reads and checks the flags; flag.ErrHelp for -h.
func parseFlags(args []string, out io.Writer) (*config, error) {
	fs := flag.NewFlagSet("sd-worker", flag.ContinueOnError)
	fs.SetOutput(out)
	c := &config{}
	var loras loraFlags
	fs.StringVar(&c.modelPath, "model-path", "", "the model: a diffusers folder (model_index.json, unet/, vae/, ...) or a single-file checkpoint (.safetensors)")
	fs.StringVar(&c.modelRef, "model-ref", "", "the model's name for clients and the hive (default: the folder's or file's name)")
	fs.StringVar(&c.tokenizer, "tokenizer", "", "a single-file checkpoint's tokenizers: a folder with tokenizer/ (and tokenizer_2/ for XL), as the diffusers folder of the same model (default: the file's folder)")
	fs.StringVar(&c.sdVersion, "sd-version", "", "what the model is: "+strings.Join(versions, ", ")+" (checked against the files; default: what they hold)")
	useF16 := fs.Bool("use-f16", false, "run in F16 (the same as -dtype f16)")
	fs.StringVar(&c.dtype, "dtype", "auto", "auto (F16 on a GPU, F32 on the CPU), f16, bf16 or f32")
	fs.StringVar(&c.workerID, "worker-id", "", "this worker's id in heartbeats and callbacks (default: sd-worker-<host>-<port>)")
	fs.StringVar(&c.host, "host", "0.0.0.0", "the address to listen on")
	fs.IntVar(&c.port, "port", 8081, "the port to listen on (0: any free port)")
	fs.StringVar(&c.device, "device", "auto", "the device: auto (the GPU when there is one), cpu, or hip:N")
	rocmDevice := fs.Int("rocm-device", -1, "the GPU ordinal: the same as -device hip:N")
	fs.StringVar(&c.hiveURL, "hive-url", "", "the hive to send heartbeats to (a URL without a path posts to its /v1/heartbeat)")
	fs.DurationVar(&c.heartbeatEvery, "heartbeat-interval", 30*time.Second, "how often to send a heartbeat to the hive (besides at each change of state)")
	fs.StringVar(&c.callbackURL, "callback-url", "", "POST each finished job there (id, status, images or error, timings), retried with backoff")
	fs.Var(&loras, "lora", "merge a LoRA into the weights as they load: file.safetensors[:scale] (repeatable; scale 1 by default)")
	fs.IntVar(&c.maxSize, "max-size", 2048, "the largest width or height a request may ask, in pixels")
	fs.IntVar(&c.maxSteps, "max-steps", 150, "the most steps a request may ask")
	fs.IntVar(&c.maxImages, "max-images", 8, "the most images one request may ask (n, batch_size × n_iter)")
	fs.IntVar(&c.maxBatch, "max-batch", 8, "the most images of concurrent requests in one UNet batch, a power of two (1: each request runs alone); the warm-up runs each batch size up to it")
	fs.IntVar(&c.maxQueue, "max-queue", 32, "the most requests waiting before 429")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 60*time.Second, "on SIGINT/SIGTERM, how long the jobs under way may take to finish before they are cut (exit status 3)")
	fs.DurationVar(&c.readTimeout, "read-timeout", 30*time.Second, "how long a request's body may take to arrive before a 408 (0: no limit)")
	fs.BoolVar(&c.graphs, "graphs", false, "capture the UNet's forward pass as a graph and replay it (a GPU; one generation at a time)")
	fs.StringVar(&c.logFormat, "log-format", "text", "the log's format: text (key=value) or json (one object a line)")
	fs.BoolVar(&c.verbose, "v", false, "log debug messages too (among them a line for each probe and scrape that succeeds)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sd-worker -model-path DIR|FILE.safetensors [flags]\n\n"+
			"Serves a Stable Diffusion model over HTTP: OpenAI's images API and AUTOMATIC1111's (see README.md).\n"+
			"LLORCH_API_TOKEN, when set, is the bearer token every endpoint but GET /health, /ready, /live and /metrics wants.\n"+
			"Exit status: 0 after a clean shutdown, 1 on a failure, 2 for bad flags, 3 when the shutdown cut jobs.\n\n")
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
	if c.device, err = worker.ResolveDevice(c.device, set["device"], *rocmDevice, set["rocm-device"]); err != nil {
		return nil, err
	}
	c.dtype = strings.ToLower(strings.TrimSpace(c.dtype))
	switch {
	case *useF16 && set["dtype"] && c.dtype != "f16":
		return nil, fmt.Errorf("-use-f16 and -dtype %s disagree: give one of them", c.dtype)
	case *useF16:
		c.dtype = "f16"
	case c.dtype != "auto" && c.dtype != "f16" && c.dtype != "bf16" && c.dtype != "f32":
		return nil, fmt.Errorf("-dtype %q: want auto, f16, bf16 or f32", c.dtype)
	}
	if err := worker.CheckLogFormat(c.logFormat); err != nil {
		return nil, err
	}
	if c.sdVersion != "" && !slices.Contains(versions, c.sdVersion) {
		return nil, fmt.Errorf("-sd-version %q: want one of %s", c.sdVersion, strings.Join(versions, ", "))
	}
	if c.maxBatch&(c.maxBatch-1) != 0 {
		return nil, fmt.Errorf("-max-batch %d: want a power of two (1, 2, 4, 8, ...): each batch size costs the convolutions an algorithm search", c.maxBatch)
	}
	for _, f := range []struct {
		name   string
		v, min int
	}{{"port", c.port, 0}, {"max-size", c.maxSize, 8}, {"max-steps", c.maxSteps, 1}, {"max-images", c.maxImages, 1},
		{"max-batch", c.maxBatch, 1}, {"max-queue", c.maxQueue, 1}} {
		if f.v < f.min || f.name == "port" && f.v > 65535 {
			return nil, fmt.Errorf("-%s %d: want at least %d", f.name, f.v, f.min)
		}
	}
	if c.shutdownTimeout < 0 || c.readTimeout < 0 {
		return nil, fmt.Errorf("-shutdown-timeout %v, -read-timeout %v: want 0 or more", c.shutdownTimeout, c.readTimeout)
	}
	if c.heartbeatEvery <= 0 {
		return nil, fmt.Errorf("-heartbeat-interval %v: want more than 0", c.heartbeatEvery)
	}
	if c.hiveURL != "" {
		if c.hiveURL, err = worker.HeartbeatURL(c.hiveURL); err != nil {
			return nil, err
		}
	}
	if c.callbackURL != "" {
		if err := checkCallbackURL(c.callbackURL); err != nil {
			return nil, err
		}
	}
	if c.modelPath == "" {
		return nil, errors.New("-model-path is missing: give a diffusers folder or a single-file checkpoint")
	}
	if _, err := os.Stat(c.modelPath); err != nil {
		return nil, fmt.Errorf("-model-path: %v", err)
	}
	if c.modelRef == "" {
		c.modelRef = strings.TrimSuffix(filepath.Base(filepath.Clean(c.modelPath)), ".safetensors")
	}
	c.loras = loras
	return c, nil
}

// run is the worker's life: flags, listen, load, warm up, serve, drain.
func (a *app) run(ctx context.Context, args []string) int {
	cfg, err := parseFlags(args, a.stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(a.stderr, "sd-worker:", err)
		return 2
	}
	logHandler, err := worker.NewLogHandler(a.stderr, cfg.logFormat, cfg.verbose)
	if err != nil {
		fmt.Fprintln(a.stderr, "sd-worker:", err)
		return 2
	}
	log := slog.New(logHandler)
	ver := worker.Version()
	token := strings.TrimSpace(a.getenv("LLORCH_API_TOKEN"))
	srv := NewServer(ServerConfig{ModelID: cfg.modelRef, ModelPath: cfg.modelPath, Version: ver, APIToken: token, MaxSize: cfg.maxSize,
		MaxSteps: cfg.maxSteps, MaxImages: cfg.maxImages, MaxBatch: cfg.maxBatch, MaxQueue: cfg.maxQueue, ReadTimeout: cfg.readTimeout, Logger: log})
	host, err := worker.Listen(worker.HostConfig{Name: "sd-worker", Host: cfg.host, Port: cfg.port, WorkerID: cfg.workerID, Model: cfg.modelRef,
		Device: cfg.device, HiveURL: cfg.hiveURL, HeartbeatEvery: cfg.heartbeatEvery, ShutdownTimeout: cfg.shutdownTimeout, Token: token,
		Version: ver, Log: log, LogHandler: logHandler, Load: srv.Load, OnListen: a.onListen, SignalsHandled: a.signalsHandled}, srv.Gate(), srv.Handler())
	if err != nil {
		log.Error(err.Error())
		return 1
	}
	var cb *callbacks
	if cfg.callbackURL != "" {
		cb = newCallbacks(cfg.callbackURL, host.WorkerID(), log)
		srv.OnJobEnd(cb.add)
		go cb.run()
		log.Info("callbacks", "url", cfg.callbackURL)
	}
	log.Info("loading the model", "path", cfg.modelPath, "device", cfg.device, "dtype", cfg.dtype, "loras", len(cfg.loras))
	return worker.Life[Backend]{Host: host, Gate: srv.Gate(),
		Load: func() (Backend, error) {
			return a.open(LoadOptions{Path: cfg.modelPath, Tokenizer: cfg.tokenizer, Version: cfg.sdVersion, Device: cfg.device, DType: cfg.dtype,
				LoRAs: cfg.loras, Graphs: cfg.graphs})
		},
		Kernels: func(each func(worker.KernelModule)) error {
			return nn.WarmKernels(cfg.device, func(m candle.ModuleReady) { each(worker.KernelModule(m)) })
		},
		Loaded: func(b Backend, took time.Duration) {
			info := b.Info()
			host.SetDevice(info.Device)
			log.Info("model loaded", "took", took.Round(time.Millisecond), "sd_version", info.Version, "device", info.Device, "dtype", info.DType,
				"device_memory", humanize.IBytes(uint64(info.DeviceMemory)), "default_size", info.DefaultSize, "sampler", info.DefaultSampler)
		},
		WarmUp: func(ctx context.Context, b Backend) error { return warmUp(ctx, b, cfg.maxBatch, log) },
		Ready:  srv.SetReady,
		Close: func(b Backend, loaded bool) error {
			srv.StopRunner()
			if cb != nil {
				cb.finish(5 * time.Second)
			}
			if !loaded {
				return nil
			}
			return b.Close()
		},
	}.Run(ctx)
}

// warmUp runs, at the model's default size, one step and a decode of
// each batch size the runner makes (batchSizes), so that the first clients
// pay neither for compiling kernels nor for the convolutions' algorithm
// searches (whose results the library keeps, on disk too on NVIDIA), then
// gives the memory its pool kept back to the device.
func warmUp(ctx context.Context, b Backend, maxBatch int, log *slog.Logger) error {
	info := b.Info()
	if info.Inpainting {
		log.Info("warm-up skipped: an inpainting model needs an image and a mask")
		return nil
	}
	size := info.DefaultSize
	for _, n := range batchSizes(maxBatch) {
		start := time.Now()
		reqs := make([]sd.Request, n)
		for i := range reqs {
			reqs[i] = sd.Request{Prompt: "warm-up", Width: size, Height: size, Steps: 1, Guidance: 7.5, Batch: 1, Seed: uint64(i)}
		}
		if _, err := b.Generate(ctx, reqs); err != nil {
			return err
		}
		log.Info("warm-up done", "size", fmt.Sprintf("%dx%d", size, size), "images", n, "took", time.Since(start).Round(time.Millisecond))
	}
	// The searches' workspaces and the largest batch's activations stay in
	// the pool otherwise (38 GiB for SD 1.5 with -max-batch 8 on an H200,
	// of a 17.5 GiB peak in use): the runs take back what they need.
	if freed := b.ReleaseCache(); freed > 0 {
		log.Info("warm-up's memory given back to the device", "freed", humanize.IBytes(uint64(freed)))
	}
	return nil
}
