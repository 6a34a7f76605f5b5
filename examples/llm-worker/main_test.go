package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/internal/worker"
	"github.com/rocm-go/rocm/internal/worker/workertest"
)

// modelDir makes a folder that looks like a Hugging Face model.
func modelDir(t *testing.T) string {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures": ["LlamaForCausalLM"]}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model-00001-of-00002.safetensors"), make([]byte, 2000), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model-00002-of-00002.safetensors"), make([]byte, 1000), 0o644))
	return dir
}

func TestFlags(t *testing.T) {
	dir := modelDir(t)
	c, err := parseFlags([]string{"-model", dir}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "auto", c.device)
	assert.Equal(t, "auto", c.dtype)
	assert.Equal(t, 8080, c.port)
	assert.Equal(t, filepath.Base(dir), c.modelRef, "the folder's name by default")
	assert.Equal(t, int64(3000), c.weightBytes)
	assert.Equal(t, 2, c.weightFiles)
	assert.Equal(t, 512, c.maxTokensDefault)
	assert.Equal(t, 30*time.Second, c.shutdownTimeout)
	assert.Equal(t, 30*time.Second, c.readTimeout)
	assert.Equal(t, time.Duration(0), c.requestTimeout, "no limit")
	assert.Equal(t, 60*time.Second, c.queueTimeout)
	assert.Equal(t, 30*time.Second, c.heartbeatEvery)
	assert.Equal(t, "text", c.logFormat)
	assert.Equal(t, 1, c.tensorParallel, "one device")

	c, err = parseFlags([]string{"-model", dir, "-model-ref", "meta-llama/Llama-3.2-1B", "-worker-id", "w7", "-port", "0", "-rocm-device", "2",
		"-dtype", "BF16", "-max-batch", "8", "-max-queue", "64", "-max-tokens-default", "100", "-hive-url", "http://127.0.0.1:7833",
		"-max-model-len", "4096", "-tensor-parallel", "2", "-kv-cache-memory", "2GiB", "-gpu-memory-utilization", "0.9",
		"-shutdown-timeout", "5s", "-read-timeout", "3s", "-request-timeout", "2m", "-queue-timeout", "0", "-heartbeat-interval", "5s", "-v", "-log-format", "json"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, &config{workerID: "w7", modelDir: dir, modelRef: "meta-llama/Llama-3.2-1B", host: "0.0.0.0", hiveURL: "http://127.0.0.1:7833/v1/heartbeat",
		port: 0, device: "hip:2", dtype: "bf16", maxBatch: 8, maxQueue: 64, maxTokensDefault: 100, shutdownTimeout: 5 * time.Second,
		readTimeout: 3 * time.Second, requestTimeout: 2 * time.Minute, heartbeatEvery: 5 * time.Second, logFormat: "json",
		verbose: true, weightBytes: 3000, weightFiles: 2, maxModelLen: 4096, tensorParallel: 2, kvCacheBytes: 2 << 30, memoryFraction: 0.9}, c)
	for _, d := range [][2]string{{"cpu", "cpu"}, {"HIP:1", "hip:1"}, {"rocm:0", "hip:0"}, {" auto ", "auto"}} {
		c, err := parseFlags([]string{"-model", dir, "-device", d[0]}, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, d[1], c.device)
	}
	c, err = parseFlags([]string{"-model", dir, "-device", "hip:3", "-rocm-device", "3"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "hip:3", c.device, "the two flags may agree")

	file := filepath.Join(dir, "config.json")
	empty := t.TempDir()
	noWeights := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(noWeights, "config.json"), []byte("{}"), 0o644))
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "-model is missing"},
		{[]string{"-model", filepath.Join(dir, "nope")}, "no such file"},
		{[]string{"-model", file}, "is a file"},
		{[]string{"-model", empty}, "has no config.json"},
		{[]string{"-model", noWeights}, "has no *.safetensors"},
		{[]string{"-model", dir, "-device", "tpu"}, "want auto, cpu or hip:N"},
		{[]string{"-model", dir, "-device", "hip:x"}, "number ≥ 0"},
		{[]string{"-model", dir, "-device", "hip:-1"}, "number ≥ 0"},
		{[]string{"-model", dir, "-rocm-device", "-2"}, "-rocm-device -2"},
		{[]string{"-model", dir, "-device", "cpu", "-rocm-device", "0"}, "disagree"},
		{[]string{"-model", dir, "-dtype", "int8"}, "-dtype \"int8\""},
		{[]string{"-model", dir, "-port", "70000"}, "-port 70000"},
		{[]string{"-model", dir, "-max-batch", "-1"}, "-max-batch -1"},
		{[]string{"-model", dir, "-max-queue", "-1"}, "-max-queue -1"},
		{[]string{"-model", dir, "-max-tokens-default", "0"}, "-max-tokens-default 0"},
		{[]string{"-model", dir, "-shutdown-timeout", "-1s"}, "-shutdown-timeout"},
		{[]string{"-model", dir, "-read-timeout", "-1s"}, "-read-timeout -1s: want 0 or more"},
		{[]string{"-model", dir, "-request-timeout", "-1s"}, "-request-timeout -1s"},
		{[]string{"-model", dir, "-queue-timeout", "-1s"}, "-queue-timeout -1s"},
		{[]string{"-model", dir, "-heartbeat-interval", "0s"}, "-heartbeat-interval 0s: want more than 0"},
		{[]string{"-model", dir, "-kv-cache-memory", "lots"}, "-kv-cache-memory \"lots\""},
		{[]string{"-model", dir, "-gpu-memory-utilization", "1.5"}, "-gpu-memory-utilization 1.5"},
		{[]string{"-model", dir, "-max-model-len", "-1"}, "-max-model-len -1"},
		{[]string{"-model", dir, "-tensor-parallel", "0"}, "-tensor-parallel 0: want 1 (one device) or more"},
		{[]string{"-model", dir, "-hive-url", "hive:7833"}, "-hive-url"},
		{[]string{"-model", dir, "-log-format", "logfmt"}, `-log-format "logfmt": want text or json`},
		{[]string{"-model", dir, "extra"}, "unexpected argument \"extra\""},
		{[]string{"-model", dir, "-port", "x"}, "invalid value"},
		{[]string{"-nope"}, "not defined"},
	} {
		_, err := parseFlags(c.args, io.Discard)
		assert.ErrorContains(t, err, c.msg, c.args)
	}
	_, err = parseFlags([]string{"-h"}, io.Discard)
	assert.ErrorIs(t, err, flag.ErrHelp)
}

func TestRunFlagErrors(t *testing.T) {
	var out workertest.LogBuffer
	a := &app{stderr: &out, getenv: func(string) string { return "" }, open: func(LoadOptions) (Backend, error) { panic("not reached") }}
	assert.Equal(t, 2, a.run(context.Background(), []string{"-device", "tpu"}))
	assert.Contains(t, out.String(), "llm-worker: -device \"tpu\": want auto, cpu or hip:N")
	assert.Equal(t, 0, a.run(context.Background(), []string{"-h"}))
	assert.Contains(t, out.String(), "usage: llm-worker -model DIR")
	assert.Contains(t, out.String(), "3 when the shutdown cut requests")
}

// testWorker is a run of the whole worker on the fake backend.
type testWorker struct {
	addr string
	code chan int
	log  *workertest.LogBuffer
	stop context.CancelFunc
}

func startWorker(t *testing.T, open OpenFunc, env map[string]string, args ...string) *testWorker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &testWorker{code: make(chan int, 1), log: &workertest.LogBuffer{}, stop: cancel}
	addrs := make(chan net.Addr, 1)
	a := &app{stderr: w.log, getenv: func(k string) string { return env[k] }, open: open,
		onListen: func(a net.Addr) { addrs <- a }}
	go func() {
		w.code <- a.run(ctx, append([]string{"-host", "127.0.0.1", "-port", "0", "-heartbeat-interval", "20ms"}, args...))
	}()
	select {
	case a := <-addrs:
		w.addr = "http://" + a.String()
	case code := <-w.code:
		select {
		case a := <-addrs: // it listened, then ended: the test looks at how
			w.addr = "http://" + a.String()
			w.code <- code
		default:
			t.Fatalf("the worker ended with %d before listening:\n%s", code, w.log)
		}
	}
	return w
}

func (w *testWorker) waitReady(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get(w.addr + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 5*time.Millisecond, "ready:\n%s", w.log)
}

func (w *testWorker) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-w.code:
		return code
	case <-time.After(20 * time.Second):
		t.Fatalf("the worker did not stop:\n%s", w.log)
		return -1
	}
}

func TestWorkerLifecycle(t *testing.T) {
	dir := modelDir(t)
	h := workertest.NewHive(t)
	fake := newFake()
	fake.delay = 10 * time.Millisecond
	release := make(chan struct{})
	var opts LoadOptions
	open := func(o LoadOptions) (Backend, error) {
		opts = o
		for done := int64(0); done <= 3000; done += 500 {
			o.Progress(done, 3000)
		}
		<-release // loading takes until the test has seen the state
		return fake, nil
	}
	w := startWorker(t, open, map[string]string{"LLORCH_API_TOKEN": "tok\n"}, "-model", dir, "-model-ref", "org/model", "-worker-id", "w1",
		"-hive-url", h.URL, "-rocm-device", "1", "-dtype", "f16", "-max-batch", "4", "-max-queue", "9", "-shutdown-timeout", "10s")
	require.Eventually(t, func() bool { b, _ := h.Got(); return len(b) > 0 }, 5*time.Second, time.Millisecond)
	resp, err := http.Get(w.addr + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "loading")
	close(release)
	w.waitReady(t)
	assert.Equal(t, LoadOptions{Dir: dir, Device: "hip:1", DType: "f16", MaxBatch: 4, MaxQueue: 9}, LoadOptions{Dir: opts.Dir, Device: opts.Device,
		DType: opts.DType, MaxBatch: opts.MaxBatch, MaxQueue: opts.MaxQueue})
	warm := fake.requests()
	require.Len(t, warm, 1, "the warm-up")
	assert.Equal(t, 8, warm[0].MaxTokens)

	require.Eventually(t, func() bool { b, _ := h.Got(); return b[len(b)-1].Status == "ready" }, 5*time.Second, time.Millisecond, "a beat at ready")

	// A stream under way when the signal comes finishes.
	req, _ := http.NewRequest("POST", w.addr+"/v1/chat/completions",
		strings.NewReader(`{"model": "org/model", "stream": true, "max_tokens": 30, "messages": [{"role": "user", "content": "hi"}]}`))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	_, err = rd.ReadString('\n')
	require.NoError(t, err)
	w.stop() // SIGTERM
	rest, err := io.ReadAll(rd)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, 30, strings.Count(string(rest), `"content":"`), "every token came")
	assert.True(t, strings.HasSuffix(string(rest), "data: [DONE]\n\n"))
	assert.Equal(t, 0, w.exit(t))
	assert.Equal(t, int32(0), fake.cancelled.Load(), "nothing was cut")
	assert.Equal(t, int32(1), fake.closeCalls.Load(), "the backend is closed once")
	_, err = http.Get(w.addr + "/health")
	assert.Error(t, err, "the port is closed")

	beats, paths := h.Got()
	require.GreaterOrEqual(t, len(beats), 3)
	assert.Equal(t, "/v1/heartbeat", paths[0])
	assert.Equal(t, worker.HeartbeatPayload{WorkerID: "w1", Model: "org/model", Device: "rocm:1", Port: beats[0].Port, Status: "loading",
		Implementation: "rocm-go", Version: beats[0].Version, Load: &worker.Load{Unit: "tokens/s"}}, beats[0], "the device the flags ask for, while loading")
	assert.Equal(t, w.addr, "http://127.0.0.1:"+strconv.Itoa(beats[0].Port))
	assert.NotEmpty(t, beats[0].Version)
	var statuses []string
	for _, b := range beats {
		if len(statuses) == 0 || statuses[len(statuses)-1] != b.Status {
			statuses = append(statuses, b.Status)
		}
	}
	assert.Equal(t, []string{"loading", "ready", "draining"}, statuses)
	last := beats[len(beats)-1]
	assert.Equal(t, "rocm:0", last.Device, "the device the model is on")

	log := w.log.String()
	for _, s := range []string{"listening", "auth=\"bearer token (LLORCH_API_TOKEN)\"", "loading the model", "weights=\"2.9 KiB\"", "files=2",
		"loading weights", "100% 2.9 KiB / 2.9 KiB", "model loaded", "device_memory=\"3.0 GiB\"", "kv_cache=\"4,096 tokens\"",
		"warm-up done", "level=INFO msg=ready", "shutting down", "generation done", "level=INFO msg=stopped"} {
		assert.Contains(t, log, s)
	}
	assert.NotContains(t, log, "level=ERROR")
	assert.NotContains(t, log, "LLORCH_API_TOKEN is not set")
}

// TestWorkerDrain: after the signal the worker keeps listening, says it
// drains, refuses new work with 503, and at -shutdown-timeout cuts what
// still runs, telling each client; its exit status says it cut.
func TestWorkerDrain(t *testing.T) {
	fake := newFake()
	fake.ctxLen = 1 << 20
	const timeout = 800 * time.Millisecond
	w := startWorker(t, func(LoadOptions) (Backend, error) { return fake, nil }, nil, "-model", modelDir(t), "-shutdown-timeout", timeout.String())
	w.waitReady(t)
	fake.delay = 20 * time.Millisecond
	resp, err := http.Post(w.addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages": [{"role": "user", "content": "x"}], "max_tokens": 100000, "stream": true, "stream_options": {"include_usage": true}}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	first, err := rd.ReadString('\n')
	require.NoError(t, err)
	whole := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(w.addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "x", "max_tokens": 100000}`))
		if assert.NoError(t, err) {
			whole <- resp
		}
	}()
	require.Eventually(t, func() bool { return fake.active.Load() == 2 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	w.stop() // SIGTERM

	get := func(path string) (int, string) {
		resp, err := http.Get(w.addr + path)
		require.NoError(t, err, "%s answers while the worker drains", path)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.Eventually(t, func() bool { _, b := get("/health"); return strings.Contains(b, `"status":"draining"`) }, 5*time.Second, time.Millisecond)
	code, _ := get("/health")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	code, body := get("/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.JSONEq(t, `{"status":"draining"}`, body)
	code, body = get("/live")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"status":"draining"}`, body)
	late, err := http.Post(w.addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "x", "max_tokens": 1}`))
	require.NoError(t, err, "a new request reaches the worker")
	lateBody, _ := io.ReadAll(late.Body)
	late.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, late.StatusCode)
	assert.Equal(t, "5", late.Header.Get("Retry-After"))
	assert.Equal(t, "draining", *decodeError(t, lateBody).Error.Code)

	rest, err := io.ReadAll(rd)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), timeout, "the stream ran until the timeout")
	evs := sseEvents(t, []byte(first+string(rest)))
	require.GreaterOrEqual(t, len(evs), 1+1+3, "role, tokens, error, final, usage")
	n := len(evs)
	e := evs[n-3]["error"].(map[string]any)
	assert.Equal(t, "shutdown", e["code"])
	assert.Contains(t, e["message"], "another worker")
	final := evs[n-2]["choices"].([]any)[0].(map[string]any)
	assert.Equal(t, "shutdown", final["finish_reason"])
	tokens := 0
	for _, ev := range evs[1 : n-3] {
		assert.Nil(t, ev["choices"].([]any)[0].(map[string]any)["finish_reason"])
		tokens++
	}
	assert.Nil(t, evs[n-2]["usage"], "the usage comes once, in its own chunk")
	assert.Empty(t, evs[n-1]["choices"])
	assert.Equal(t, float64(tokens), evs[n-1]["usage"].(map[string]any)["completion_tokens"], "the usage of what was sent")

	r := <-whole
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, r.StatusCode)
	assert.Equal(t, "shutdown", *decodeError(t, b).Error.Code)

	assert.Equal(t, worker.ExitCut, w.exit(t))
	assert.Equal(t, int32(2), fake.cancelled.Load(), "both were cancelled at the timeout")
	assert.Equal(t, int32(0), fake.active.Load())
	_, err = http.Get(w.addr + "/health")
	assert.Error(t, err, "the port is closed once the worker stops")
	log := w.log.String()
	assert.Contains(t, log, "shutdown timeout: the requests under way were cut")
	assert.Contains(t, log, "msg=stopped cut=2")
	assert.NotContains(t, log, "LLORCH_API_TOKEN is not set", "the worker listens on loopback only")
}

// TestWorkerDeadlineFlags: the deadline flags reach the server.
func TestWorkerDeadlineFlags(t *testing.T) {
	fake := newFake()
	fake.ctxLen = 1 << 20
	w := startWorker(t, func(LoadOptions) (Backend, error) { return fake, nil }, nil, "-model", modelDir(t),
		"-read-timeout", "150ms", "-request-timeout", "150ms", "-queue-timeout", "100ms")
	w.waitReady(t)
	fake.delay = 10 * time.Millisecond
	client := &http.Client{Timeout: 5 * time.Second} // without the flags, the requests would hang
	post := func(body string) (int, string) {
		resp, err := client.Post(w.addr+"/v1/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, *decodeError(t, b).Error.Code
	}
	code, errCode := post(`{"prompt": "x", "max_tokens": 100000}`)
	assert.Equal(t, [2]any{http.StatusGatewayTimeout, "request_timeout"}, [2]any{code, errCode}, "-request-timeout")

	fake.running = make(chan struct{}) // no slot: every request waits
	code, errCode = post(`{"prompt": "x", "max_tokens": 1}`)
	assert.Equal(t, [2]any{http.StatusServiceUnavailable, "queue_timeout"}, [2]any{code, errCode}, "-queue-timeout")

	conn, err := net.Dial("tcp", strings.TrimPrefix(w.addr, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "-read-timeout")
	w.stop()
	assert.Equal(t, 0, w.exit(t), "nothing was under way at the signal")
}

func TestWorkerLoadFailures(t *testing.T) {
	dir := modelDir(t)
	h := workertest.NewHive(t)
	w := startWorker(t, func(LoadOptions) (Backend, error) { return nil, errors.New("config.json: unknown architecture") }, nil,
		"-model", dir, "-hive-url", h.URL)
	assert.Equal(t, 1, w.exit(t))
	assert.Contains(t, w.log.String(), "loading the model failed")
	assert.Contains(t, w.log.String(), "unknown architecture")
	beats, _ := h.Got()
	require.NotEmpty(t, beats)
	last := beats[len(beats)-1]
	assert.Equal(t, "failed", last.Status, "the hive learns that the load failed, not that the worker drains")
	assert.Contains(t, last.Error, "unknown architecture")

	// A signal during loading ends the worker without waiting for the load.
	release := make(chan struct{})
	defer close(release)
	var loading atomic.Bool
	w = startWorker(t, func(LoadOptions) (Backend, error) { loading.Store(true); <-release; return nil, errors.New("late") }, nil, "-model", dir)
	require.Eventually(t, loading.Load, 5*time.Second, time.Millisecond)
	w.stop()
	assert.Equal(t, 1, w.exit(t))
	assert.Contains(t, w.log.String(), "interrupted while loading the model")

	// A warm-up that fails ends it, and closes the backend.
	fake := newFake()
	fake.failAt = 1
	w = startWorker(t, func(LoadOptions) (Backend, error) { return fake, nil }, nil, "-model", dir)
	assert.Equal(t, 1, w.exit(t))
	assert.Contains(t, w.log.String(), "warm-up failed")
	assert.Equal(t, int32(1), fake.closeCalls.Load())

	// The real backend says what is wrong with the folder: its weights
	// (two shards of zeros), then, with weights that read, its config.
	w = startWorker(t, openBackend, nil, "-model", dir)
	assert.Equal(t, 1, w.exit(t))
	assert.Contains(t, w.log.String(), "loading the model failed")
	assert.Contains(t, w.log.String(), "model-00001-of-00002.safetensors")
	for _, f := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		require.NoError(t, os.Remove(filepath.Join(dir, f)))
	}
	require.NoError(t, safetensors.Save(filepath.Join(dir, "model.safetensors"), nil, nil))
	w = startWorker(t, openBackend, nil, "-model", dir)
	assert.Equal(t, 1, w.exit(t))
	assert.Contains(t, w.log.String(), "loading the model failed")
	assert.Contains(t, w.log.String(), "config.json")
	assert.Contains(t, w.log.String(), "hidden_size is missing")

	// A port in use.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var out workertest.LogBuffer
	a := &app{stderr: &out, getenv: func(string) string { return "" }, open: openBackend}
	assert.Equal(t, 1, a.run(context.Background(), []string{"-model", dir, "-host", "127.0.0.1", "-port", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)}))
	assert.Contains(t, out.String(), "cannot listen")
}

// TestWorkerJSONLogs: with -log-format json everything the worker writes
// is JSON lines, the load's progress included, and its requests have
// their lines with their ids.
func TestWorkerJSONLogs(t *testing.T) {
	fake := newFake()
	open := func(o LoadOptions) (Backend, error) {
		for done := int64(0); done <= 3000; done += 500 {
			o.Progress(done, 3000)
		}
		return fake, nil
	}
	w := startWorker(t, open, nil, "-model", modelDir(t), "-log-format", "json")
	w.waitReady(t)
	req, _ := http.NewRequest("POST", w.addr+"/v1/completions", strings.NewReader(`{"prompt": "x", "max_tokens": 2}`))
	req.Header.Set("X-Request-Id", "trace-42")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "trace-42", resp.Header.Get("X-Request-Id"))
	w.stop()
	assert.Equal(t, 0, w.exit(t))
	var msgs []string
	var reqLine map[string]any
	for line := range strings.Lines(w.log.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "a JSON line: %q", line)
		msgs = append(msgs, rec["msg"].(string))
		if rec["msg"] == "request" && rec["path"] == "/v1/completions" {
			reqLine = rec
		}
	}
	for _, m := range []string{"listening", "loading the model", "loading weights", "model loaded", "warm-up done", "ready", "generation done", "stopped"} {
		assert.Contains(t, msgs, m)
	}
	require.NotNil(t, reqLine, "the request's line")
	assert.Equal(t, "trace-42", reqLine["request_id"])
	assert.Equal(t, 200.0, reqLine["status"])
}
