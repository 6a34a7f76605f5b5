package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle/models/sd"
	"github.com/rocm-go/rocm/internal/worker"
	"github.com/rocm-go/rocm/internal/worker/workertest"
)

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	c, err := parseFlags([]string{"-model-path", dir}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "auto", c.device)
	assert.Equal(t, "auto", c.dtype)
	assert.Equal(t, 8081, c.port)
	assert.Equal(t, filepath.Base(dir), c.modelRef)
	assert.Equal(t, 8, c.maxBatch)
	assert.Equal(t, "text", c.logFormat)

	lora := filepath.Join(dir, "style.safetensors")
	require.NoError(t, os.WriteFile(lora, nil, 0o644))
	c, err = parseFlags([]string{"-model-path", dir, "-worker-id", "w2", "-rocm-device", "1", "-use-f16", "-sd-version", "xl", "-port", "0",
		"-hive-url", "http://hive:7833", "-callback-url", "http://cb:9/done", "-lora", lora + ":0.7", "-lora", lora, "-max-batch", "1",
		"-heartbeat-interval", "5s", "-graphs", "-log-format", "json"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "hip:1", c.device)
	assert.Equal(t, "f16", c.dtype)
	assert.Equal(t, "xl", c.sdVersion)
	assert.Equal(t, "http://hive:7833/v1/heartbeat", c.hiveURL)
	assert.Equal(t, []sd.LoRA{{Path: lora, Scale: 0.7}, {Path: lora, Scale: 1}}, c.loras)
	assert.Equal(t, 1, c.maxBatch)
	assert.Equal(t, 5*time.Second, c.heartbeatEvery)
	assert.True(t, c.graphs)
	assert.Equal(t, "json", c.logFormat)

	for _, bad := range []struct {
		args []string
		msg  string
	}{
		{nil, "-model-path is missing"},
		{[]string{"-model-path", filepath.Join(dir, "nope")}, "no such file"},
		{[]string{"-model-path", dir, "-sd-version", "v3"}, "want one of v1-5, v2-1, xl, turbo"},
		{[]string{"-model-path", dir, "-use-f16", "-dtype", "f32"}, "disagree"},
		{[]string{"-model-path", dir, "-dtype", "f64"}, "want auto, f16, bf16 or f32"},
		{[]string{"-model-path", dir, "-device", "tpu"}, "want auto, cpu or hip:N"},
		{[]string{"-model-path", dir, "-max-batch", "0"}, "-max-batch 0"},
		{[]string{"-model-path", dir, "-max-batch", "6"}, "want a power of two"},
		{[]string{"-model-path", dir, "-port", "70000"}, "-port 70000"},
		{[]string{"-model-path", dir, "-log-format", "yaml"}, `-log-format "yaml": want text or json`},
		{[]string{"-model-path", dir, "-callback-url", "ftp://x"}, "-callback-url"},
		{[]string{"-model-path", dir, "-hive-url", "hive"}, "-hive-url"},
		{[]string{"-model-path", dir, "-lora", filepath.Join(dir, "missing.safetensors")}, "not a LoRA file"},
		{[]string{"-model-path", dir, "-heartbeat-interval", "0s"}, "-heartbeat-interval"},
		{[]string{"-model-path", dir, "extra"}, "unexpected argument"},
	} {
		_, err := parseFlags(bad.args, io.Discard)
		assert.ErrorContains(t, err, bad.msg, "%v", bad.args)
	}
}

// runWorker runs the whole worker; it returns its address, a stop func
// and the exit status channel.
func runWorker(t *testing.T, open OpenFunc, env map[string]string, args ...string) (string, *workertest.LogBuffer, context.CancelFunc, chan int) {
	t.Helper()
	lb := &workertest.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addrs := make(chan net.Addr, 1)
	a := &app{stderr: lb, getenv: func(k string) string { return env[k] }, open: open, onListen: func(a net.Addr) { addrs <- a }}
	code := make(chan int, 1)
	go func() {
		code <- a.run(ctx, append([]string{"-host", "127.0.0.1", "-port", "0", "-heartbeat-interval", "20ms"}, args...))
	}()
	select {
	case a := <-addrs:
		return "http://" + a.String(), lb, cancel, code
	case c := <-code:
		t.Fatalf("the worker ended with %d before listening:\n%s", c, lb)
	case <-time.After(10 * time.Second):
		t.Fatalf("the worker did not listen:\n%s", lb)
	}
	return "", nil, nil, nil
}

// waitReady waits for the worker's /ready to answer 200.
func waitReady(t *testing.T, url string, lb *workertest.LogBuffer) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 2*time.Minute, 5*time.Millisecond, "ready:\n%s", lb)
}

func waitExit(t *testing.T, code chan int, lb *workertest.LogBuffer) int {
	t.Helper()
	select {
	case c := <-code:
		return c
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker did not stop:\n%s", lb)
	}
	return -1
}

// TestWorkerLifecycle: the real worker on the tiny model: it loads, warms
// up, tells the hive, wants the token, serves an image, and drains.
func TestWorkerLifecycle(t *testing.T) {
	h := workertest.NewHive(t)
	url, lb, stop, code := runWorker(t, openBackend, map[string]string{"LLORCH_API_TOKEN": "secret\n"}, "-model-path", tinyModel(t),
		"-device", "cpu", "-worker-id", "sd1", "-hive-url", h.URL, "-sd-version", "v1-5", "-max-batch", "2")
	waitReady(t, url, lb)
	resp, err := http.Post(url+"/v1/images/generations", "application/json", strings.NewReader(`{"prompt": "x", "steps": 2, "size": "8x8"}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	req, _ := http.NewRequest("POST", url+"/v1/images/generations", strings.NewReader(`{"prompt": "x", "steps": 2, "size": "8x8"}`))
	req.Header.Set("Authorization", "Bearer secret")
	status, _, out := send(t, req)
	require.Equal(t, http.StatusOK, status, string(out))
	var health map[string]any
	resp, err = http.Get(url + "/health")
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&health))
	resp.Body.Close()
	assert.Equal(t, "ready", health["status"])
	assert.Equal(t, "v1-5", health["sd_version"])
	assert.Equal(t, "cpu", health["device"])
	// The beat after the image reports a rate; the ones after it 0 again,
	// so any beat will do.
	require.Eventually(t, func() bool {
		beats, _ := h.Got()
		return slices.ContainsFunc(beats, func(b worker.HeartbeatPayload) bool { return b.Load != nil && b.Load.Rate > 0 })
	}, 10*time.Second, 5*time.Millisecond, "a beat reports the images made")
	stop()
	assert.Equal(t, 0, waitExit(t, code, lb))
	beats, _ := h.Got()
	var states []string
	for _, b := range beats {
		if len(states) == 0 || states[len(states)-1] != b.Status {
			states = append(states, b.Status)
		}
	}
	assert.Equal(t, []string{"loading", "ready", "draining"}, states)
	last := beats[len(beats)-1]
	assert.Equal(t, "cpu", last.Device)
	assert.Equal(t, "images/min", last.Load.Unit)
	assert.Contains(t, lb.String(), "warm-up done")
	assert.Contains(t, lb.String(), "job done")
}

// TestWorkerFailures: a load that fails is reported as failed; a model
// that is not what -sd-version says is refused; a shutdown that cuts a
// job exits 3.
func TestWorkerFailures(t *testing.T) {
	h := workertest.NewHive(t)
	_, lb, _, code := runWorker(t, func(LoadOptions) (Backend, error) { return nil, errors.New("unet/config.json: bad") }, nil,
		"-model-path", t.TempDir(), "-hive-url", h.URL)
	assert.Equal(t, 1, waitExit(t, code, lb))
	beats, _ := h.Got()
	require.NotEmpty(t, beats)
	assert.Equal(t, "failed", beats[len(beats)-1].Status)
	assert.Contains(t, beats[len(beats)-1].Error, "unet/config.json: bad")

	_, lb, _, code = runWorker(t, openBackend, nil, "-model-path", tinyModel(t), "-device", "cpu", "-sd-version", "xl")
	assert.Equal(t, 1, waitExit(t, code, lb))
	assert.Contains(t, lb.String(), "-sd-version xl, but")
	assert.Contains(t, lb.String(), "holds a v1-5 model (one text encoder with quick_gelu)")

	fake := newFake()
	url, lb, stop, code := runWorker(t, func(LoadOptions) (Backend, error) { return fake, nil }, nil, "-model-path", t.TempDir(),
		"-shutdown-timeout", "50ms", "-max-batch", "1")
	<-fake.started // the warm-up
	waitReady(t, url, lb)
	assert.Equal(t, int32(1), fake.released.Load(), "the warm-up gives its memory back")
	fake.hold.Store(true)
	result := make(chan int, 1)
	go func() {
		resp, err := http.Post(url+"/v1/images/generations", "application/json", strings.NewReader(`{"prompt": "x", "steps": 2}`))
		if err != nil {
			result <- 0
			return
		}
		resp.Body.Close()
		result <- resp.StatusCode
	}()
	<-fake.started
	stop()
	assert.Equal(t, worker.ExitCut, waitExit(t, code, lb))
	assert.Equal(t, http.StatusServiceUnavailable, <-result, "the cut job's client is told")
	assert.Contains(t, lb.String(), "cut=1")
}

// TestWorkerJSONLogs: with -log-format json everything the worker writes
// is JSON lines; a request's line has its id, and /metrics answers
// without the token.
func TestWorkerJSONLogs(t *testing.T) {
	fake := newFake()
	url, lb, stop, code := runWorker(t, func(LoadOptions) (Backend, error) { return fake, nil }, map[string]string{"LLORCH_API_TOKEN": "tok"},
		"-model-path", t.TempDir(), "-log-format", "json")
	waitReady(t, url, lb)
	req, _ := http.NewRequest("POST", url+"/v1/images/generations", strings.NewReader(`{"prompt": "x", "steps": 2}`))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("X-Request-Id", "trace-7")
	status, hdr, _ := send(t, req)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "trace-7", hdr.Get("X-Request-Id"))
	assert.Equal(t, 1.0, workertest.Scrape(t, url)["rocm_go:images_generated_total"], "no token needed")
	stop()
	assert.Equal(t, 0, waitExit(t, code, lb))
	var msgs []string
	for line := range strings.Lines(lb.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "a JSON line: %q", line)
		msgs = append(msgs, rec["msg"].(string))
		if rec["request_id"] == "trace-7" {
			assert.Contains(t, []string{"job done", "request"}, rec["msg"])
		}
	}
	for _, m := range []string{"listening", "model loaded", "warm-up done", "ready", "job done", "request", "stopped"} {
		assert.Contains(t, msgs, m)
	}
}
