package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd"
	"github.com/rocm-go/rocm/candle/models/sd/scheduler"
	"github.com/rocm-go/rocm/internal/mkmodel"
	"github.com/rocm-go/rocm/internal/testenv"
	"github.com/rocm-go/rocm/internal/worker/workertest"
)

var (
	tinyOnce sync.Once
	tinyDir  string
	tinyErr  error
)

// tinyModel is a tiny random SD 1.x folder, written once per test run.
func tinyModel(t *testing.T) string {
	tinyOnce.Do(func() {
		tinyDir, tinyErr = os.MkdirTemp("", "sd-worker-test-")
		if tinyErr == nil {
			tinyErr = mkmodel.WriteSD(filepath.Join(tinyDir, "tiny-sd"), mkmodel.TinySD(), nil)
		}
	})
	require.NoError(t, tinyErr)
	return filepath.Join(tinyDir, "tiny-sd")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tinyDir != "" {
		os.RemoveAll(tinyDir)
	}
	os.Exit(code)
}

// testServer is a Server on loopback with its log.
type testServer struct {
	*httptest.Server
	api *Server
	log *workertest.LogBuffer
}

func newTestServer(t *testing.T, b Backend, cfg ServerConfig) *testServer {
	lb := &workertest.LogBuffer{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.ModelID == "" {
		cfg.ModelID = "tiny-sd"
	}
	api := NewServer(cfg)
	ts := &testServer{Server: httptest.NewServer(api.Handler()), api: api, log: lb}
	if b != nil {
		api.SetReady(b)
	}
	t.Cleanup(func() { ts.Close(); api.StopRunner() })
	return ts
}

func (ts *testServer) do(t *testing.T, method, path, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	return send(t, req)
}

func send(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

type apiErr struct {
	Error struct {
		Message string  `json:"message"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeErr(t *testing.T, b []byte) apiErr {
	t.Helper()
	var e apiErr
	require.NoError(t, json.Unmarshal(b, &e), string(b))
	return e
}

// decodePNG decodes a base64 PNG and its parameters chunk.
func decodePNG(t *testing.T, s string) (image.Image, string) {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(b))
	require.NoError(t, err)
	chunks, err := pngText(b)
	require.NoError(t, err)
	return img, chunks["parameters"]
}

func pngBytes(t *testing.T, img image.Image) []byte {
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

func realBackend(t *testing.T) Backend {
	b, err := openBackend(LoadOptions{Path: tinyModel(t), Device: "cpu", DType: "auto"})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// TestOpenAIGenerations drives the real pipeline (tiny, CPU) through
// OpenAI's images API: the images, their parameters, the seed's
// determinism.
func TestOpenAIGenerations(t *testing.T) {
	b := realBackend(t)
	info := b.Info()
	assert.Equal(t, ModelInfo{Version: "v1-5", Device: "cpu", DType: "f32", Multiple: 4, DefaultSize: 16, DefaultSampler: "Euler",
		DeviceMemory: info.DeviceMemory}, info)
	ts := newTestServer(t, b, ServerConfig{})
	body := `{"prompt": "a red cat", "n": 2, "size": "8x8", "steps": 2, "seed": 7, "negative_prompt": "blurry", "guidance_scale": 5}`
	code, hdr, out := ts.do(t, "POST", "/v1/images/generations", body)
	require.Equal(t, http.StatusOK, code, string(out))
	var resp openAIImagesResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	assert.Equal(t, hdr.Get("X-Job-Id"), resp.JobID)
	assert.Equal(t, uint64(7), resp.Seed)
	require.Len(t, resp.Data, 2)
	img, text := decodePNG(t, resp.Data[0].B64JSON)
	assert.Equal(t, image.Rect(0, 0, 8, 8), img.Bounds())
	assert.Equal(t, "a red cat\nNegative prompt: blurry\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 7, Size: 8x8, Model: tiny-sd", text)
	assert.Equal(t, 1, resp.Timings.Batched)

	_, _, again := ts.do(t, "POST", "/v1/images/generations", body)
	var resp2 openAIImagesResponse
	require.NoError(t, json.Unmarshal(again, &resp2))
	assert.Equal(t, resp.Data[1].B64JSON, resp2.Data[1].B64JSON, "the same seed makes the same image")
	assert.Contains(t, ts.log.String(), "job done")

	// A random seed, a sampler by A1111's name.
	code, _, out = ts.do(t, "POST", "/v1/images/generations", `{"prompt": "a cat", "size": "4x4", "steps": 1, "sampler": "Euler a"}`)
	require.Equal(t, http.StatusOK, code, string(out))
	require.NoError(t, json.Unmarshal(out, &resp))
	_, text = decodePNG(t, resp.Data[0].B64JSON)
	assert.Contains(t, text, "Steps: 1, Sampler: Euler a")
	assert.Contains(t, text, "Seed: "+strconv.FormatUint(resp.Seed, 10))
}

// TestDefaults: what a request that gives only a prompt runs, for SD and
// for a turbo model.
func TestDefaults(t *testing.T) {
	fake := newFake()
	ts := newTestServer(t, fake, ServerConfig{})
	code, _, out := ts.do(t, "POST", "/v1/images/generations", `{"prompt": "a cat"}`)
	require.Equal(t, http.StatusOK, code, string(out))
	r := fake.got()[0][0]
	assert.Equal(t, [5]any{16, 16, 30, 7.5, scheduler.Euler}, [5]any{r.Width, r.Height, r.Steps, r.Guidance, r.Sampler})
	assert.Equal(t, 1, r.Batch)
	fake.info.Version = "turbo"
	code, _, out = ts.do(t, "POST", "/sdapi/v1/txt2img", `{"prompt": "a cat", "sampler_name": "EulerAncestralDiscreteScheduler"}`)
	require.Equal(t, http.StatusOK, code, string(out))
	r = fake.got()[1][0]
	assert.Equal(t, [4]any{4, 1.0, scheduler.EulerAncestral, 16}, [4]any{r.Steps, r.Guidance, r.Sampler, r.Width}, "turbo: 4 steps, no guidance")
}

// TestA1111 drives the real pipeline through AUTOMATIC1111's API:
// txt2img, img2img, inpainting, and the listing endpoints.
func TestA1111(t *testing.T) {
	ts := newTestServer(t, realBackend(t), ServerConfig{ModelPath: "/models/tiny-sd"})
	code, _, out := ts.do(t, "POST", "/sdapi/v1/txt2img", `{"prompt": "a cat", "steps": 2, "width": 8, "height": 4, "seed": 5, "cfg_scale": 6,
		"sampler_name": "DPM++ 2M", "batch_size": 2, "n_iter": 1, "enable_hr": false, "override_settings": {}}`)
	require.Equal(t, http.StatusOK, code, string(out))
	var resp a1111Response
	require.NoError(t, json.Unmarshal(out, &resp))
	require.Len(t, resp.Images, 2)
	img, text := decodePNG(t, resp.Images[0])
	assert.Equal(t, image.Rect(0, 0, 8, 4), img.Bounds())
	assert.Equal(t, "a cat\nSteps: 2, Sampler: DPM++ 2M, CFG scale: 6, Seed: 5, Size: 8x4, Model: tiny-sd", text)
	var info map[string]any
	require.NoError(t, json.Unmarshal([]byte(resp.Info), &info))
	assert.Equal(t, []any{5.0, 5.0}, info["all_seeds"])
	assert.Equal(t, 5.0, resp.Parameters["seed"])
	assert.Equal(t, false, resp.Parameters["enable_hr"], "the request comes back")

	// img2img from a 12×12 image resized to 8×8, then inpainting.
	src := solid(12, 12, 90)
	init := base64.StdEncoding.EncodeToString(pngBytes(t, src))
	code, _, out = ts.do(t, "POST", "/sdapi/v1/img2img", `{"prompt": "a cat", "steps": 2, "width": 8, "height": 8, "seed": 1,
		"denoising_strength": 0.5, "init_images": ["data:image/png;base64,`+init+`"]}`)
	require.Equal(t, http.StatusOK, code, string(out))
	require.NoError(t, json.Unmarshal(out, &resp))
	_, text = decodePNG(t, resp.Images[0])
	assert.Contains(t, text, "Denoising strength: 0.5")
	mask := image.NewGray(image.Rect(0, 0, 8, 8))
	for y := range 4 {
		for x := range 8 {
			mask.SetGray(x, y, color.Gray{255})
		}
	}
	code, _, out = ts.do(t, "POST", "/sdapi/v1/img2img", `{"prompt": "a cat", "steps": 2, "seed": 1, "init_images": ["`+
		base64.StdEncoding.EncodeToString(pngBytes(t, solid(8, 8, 90)))+`"], "mask": "`+base64.StdEncoding.EncodeToString(pngBytes(t, mask))+`"}`)
	require.Equal(t, http.StatusOK, code, string(out))
	require.NoError(t, json.Unmarshal(out, &resp))
	img, _ = decodePNG(t, resp.Images[0])
	assert.Equal(t, color.RGBA{90, 165, 7, 255}, color.RGBAModel.Convert(img.At(3, 6)), "the kept half is the image's")

	code, _, out = ts.do(t, "GET", "/sdapi/v1/samplers", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(out), `"name":"Euler a"`)
	assert.Contains(t, string(out), `"name":"DPM++ 2M"`)
	code, _, out = ts.do(t, "GET", "/sdapi/v1/sd-models", "")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `[{"title": "tiny-sd", "model_name": "tiny-sd", "hash": null, "sha256": null, "filename": "/models/tiny-sd", "config": null}]`, string(out))
	code, _, out = ts.do(t, "GET", "/sdapi/v1/progress", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(out), `"progress":0`)
}

// TestOpenAIEdits: the edits endpoint's multipart form, its mask's
// transparent pixels repainted.
func TestOpenAIEdits(t *testing.T) {
	ts := newTestServer(t, realBackend(t), ServerConfig{})
	mask := image.NewNRGBA(image.Rect(0, 0, 8, 8))
	for y := range 8 {
		for x := range 8 {
			a := uint8(255)
			if y < 4 {
				a = 0 // edit the top half
			}
			mask.SetNRGBA(x, y, color.NRGBA{0, 0, 0, a})
		}
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range map[string]string{"prompt": "a hat", "steps": "2", "seed": "3", "n": "1"} {
		mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("image", "in.png")
	fw.Write(pngBytes(t, solid(8, 8, 40)))
	fw, _ = mw.CreateFormFile("mask", "mask.png")
	fw.Write(pngBytes(t, mask))
	mw.Close()
	req, _ := http.NewRequest("POST", ts.URL+"/v1/images/edits", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	code, _, out := send(t, req)
	require.Equal(t, http.StatusOK, code, string(out))
	var resp openAIImagesResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	img, text := decodePNG(t, resp.Data[0].B64JSON)
	assert.Equal(t, color.RGBA{40, 215, 7, 255}, color.RGBAModel.Convert(img.At(5, 6)), "the opaque half is kept")
	assert.Contains(t, text, "Denoising strength: 1")

	req, _ = http.NewRequest("POST", ts.URL+"/v1/images/edits", strings.NewReader(`{"prompt": "x"}`))
	req.Header.Set("Content-Type", "application/json")
	code, _, out = send(t, req)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, decodeErr(t, out).Error.Message, "multipart/form-data")
}

// TestBadInput: each bad request gets a 4xx that says what is wrong, and
// the worker goes on serving.
func TestBadInput(t *testing.T) {
	fake := newFake()
	ts := newTestServer(t, fake, ServerConfig{MaxSize: 64, MaxSteps: 50, MaxImages: 4})
	huge := pngHeader(100000, 100000)
	tiny := base64.StdEncoding.EncodeToString(pngBytes(t, solid(16, 16, 1)))
	for _, c := range []struct {
		path, body string
		status     int
		param, msg string
	}{
		{"/v1/images/generations", `{"prompt": "x", "size": "20x20"}`, 400, "size", "multiples of 8"},
		{"/v1/images/generations", `{"prompt": "x", "size": "128x128"}`, 400, "size", "at most 64 pixels"},
		{"/v1/images/generations", `{"prompt": "x", "size": "big"}`, 400, "size", "WIDTHxHEIGHT"},
		{"/v1/images/generations", `{"prompt": "x", "steps": 51}`, 400, "steps", "1 to 50"},
		{"/v1/images/generations", `{"prompt": "x", "steps": -1}`, 400, "steps", "1 to 50"},
		{"/v1/images/generations", `{"prompt": "x", "guidance_scale": 31}`, 400, "guidance_scale", "0 to 30"},
		{"/v1/images/generations", `{"prompt": "x", "n": 5}`, 400, "n", "1 to 4"},
		{"/v1/images/generations", `{"prompt": "x", "sampler": "Heun"}`, 400, "sampler", "unknown sampler"},
		{"/v1/images/generations", `{"prompt": "x", "response_format": "url"}`, 400, "response_format", "b64_json only"},
		{"/v1/images/generations", `{"prompt": ""}`, 400, "prompt", "missing or empty"},
		{"/v1/images/generations", `{"prompt": "untokenizable"}`, 400, "prompt", "cannot encode"},
		{"/v1/images/generations", `{"prompt": 3}`, 400, "prompt", "want a string"},
		{"/v1/images/generations", `{"prompt": "x", "model": "dall-e-3"}`, 404, "model", "not served here"},
		{"/v1/images/generations", `{"prompt": "x"`, 400, "", "malformed JSON"},
		{"/v1/images/generations", `{"prompt": "x", "job_id": "a/b"}`, 400, "job_id", "without /"},
		{"/sdapi/v1/img2img", `{"prompt": "x", "init_images": ["` + base64.StdEncoding.EncodeToString(huge) + `"]}`, 400, "init_images", "at most 64 pixels"},
		{"/sdapi/v1/img2img", `{"prompt": "x", "init_images": ["bm90IGFuIGltYWdl"]}`, 400, "init_images", "not a PNG or JPEG"},
		{"/sdapi/v1/img2img", `{"prompt": "x", "init_images": ["%%%"]}`, 400, "init_images", "not base64"},
		{"/sdapi/v1/img2img", `{"prompt": "x", "init_images": []}`, 400, "init_images", "want one"},
		{"/sdapi/v1/img2img", `{"prompt": "x", "init_images": ["` + tiny + `"], "denoising_strength": 1.5}`, 400, "denoising_strength", "at most 1"},
		{"/sdapi/v1/img2img", `{"prompt": "x", "init_images": ["` + tiny + `"], "mask": "bm9wZQ=="}`, 400, "mask", "not a PNG or JPEG"},
		{"/sdapi/v1/txt2img", `{"prompt": "x", "mask": "` + tiny + `"}`, 400, "init_images", "use /sdapi/v1/img2img"},
		{"/sdapi/v1/txt2img", `{"prompt": "x", "batch_size": -1}`, 400, "batch_size", "want 1 or more"},
		{"/sdapi/v1/txt2img", `{"prompt": "x", "cfg_scale": -2}`, 400, "cfg_scale", "0 to 30"},
	} {
		code, _, out := ts.do(t, "POST", c.path, c.body)
		assert.Equal(t, c.status, code, "%s %s: %s", c.path, c.body, out)
		e := decodeErr(t, out)
		assert.Contains(t, e.Error.Message, c.msg, c.body)
		if c.param != "" && assert.NotNil(t, e.Error.Param, c.body) {
			assert.Equal(t, c.param, *e.Error.Param, c.body)
		}
	}
	assert.Empty(t, fake.got(), "no bad request reached the backend")

	// A request too large for the device is refused before it starts.
	fake.fits = assert.AnError
	code, _, out := ts.do(t, "POST", "/v1/images/generations", `{"prompt": "x", "n": 4, "size": "64x64"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Equal(t, "too_large_for_device", *decodeErr(t, out).Error.Code)
	fake.fits = nil

	// A prompt beyond the window is cut, and the response says so.
	code, _, out = ts.do(t, "POST", "/v1/images/generations", `{"prompt": "`+strings.Repeat("a cat ", 100)+`", "steps": 2}`)
	require.Equal(t, http.StatusOK, code, string(out))
	var resp openAIImagesResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	require.Len(t, resp.Warnings, 1)
	assert.Contains(t, resp.Warnings[0], "77-token window")

	for _, c := range [][2]string{{"GET", "/v1/images/generations"}, {"POST", "/sdapi/v1/samplers"}, {"PUT", "/v1/jobs/x"}} {
		code, hdr, _ := ts.do(t, c[0], c[1], "")
		assert.Equal(t, http.StatusMethodNotAllowed, code, c)
		assert.NotEmpty(t, hdr.Get("Allow"))
	}
	code, _, out = ts.do(t, "GET", "/nope", "")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, decodeErr(t, out).Error.Message, "/sdapi/v1/txt2img")
	code, _, _ = ts.do(t, "GET", "/v1/jobs/unknown", "")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, ts.log.String(), `msg="request refused"`, "rejected requests are logged")

	// A backend failure is a 500 with the reason, and the worker goes on.
	fake.fail = assert.AnError
	code, _, out = ts.do(t, "POST", "/v1/images/generations", `{"prompt": "x", "steps": 2}`)
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, decodeErr(t, out).Error.Message, "assert.AnError")
	fake.fail = nil
	code, _, _ = ts.do(t, "POST", "/v1/images/generations", `{"prompt": "x", "steps": 2}`)
	assert.Equal(t, http.StatusOK, code)
}

// pngHeader is the start of a PNG that claims w×h pixels.
func pngHeader(w, h int) []byte {
	ihdr := []byte{byte(w >> 24), byte(w >> 16), byte(w >> 8), byte(w), byte(h >> 24), byte(h >> 16), byte(h >> 8), byte(h), 8, 2, 0, 0, 0}
	return append([]byte("\x89PNG\r\n\x1a\n"), pngChunk("IHDR", ihdr)...)
}

// post runs a request in the background; its status comes on the channel.
// post sends a JSON body with the header's name and value pairs, and
// sends the status on the channel it returns (0 when no answer came).
func post(ts *testServer, path, body string, header ...string) chan int {
	ch := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ch <- resp.StatusCode
	}()
	return ch
}

// TestBatching: requests that arrive while a batch runs share the next
// UNet batch when they can (same size, steps, sampler), each with its own
// seed and prompt; the others run alone.
func TestBatching(t *testing.T) {
	fake := newFake()
	fake.hold.Store(true)
	ts := newTestServer(t, fake, ServerConfig{MaxBatch: 4})
	first := post(ts, "/v1/images/generations", `{"prompt": "first", "steps": 2, "seed": 1}`)
	<-fake.started
	var waiting []chan int
	for i, body := range []string{
		`{"prompt": "a", "steps": 2, "seed": 10, "job_id": "a"}`,
		`{"prompt": "b", "steps": 2, "seed": 20, "job_id": "b"}`,
		`{"prompt": "c", "steps": 3, "seed": 30, "job_id": "c"}`, // other steps: alone
		`{"prompt": "d", "steps": 2, "seed": 40, "n": 2, "job_id": "d"}`,
		`{"prompt": "e", "steps": 2, "seed": 50, "job_id": "e"}`,         // would make 5 images: the next batch
		`{"prompt": "f", "steps": 2, "seed": 60, "n": 2, "job_id": "f"}`, // with e, 3 images: not a power of two, so e alone
	} {
		waiting = append(waiting, post(ts, "/v1/images/generations", body))
		require.Eventually(t, func() bool { w, _ := ts.api.run.counts(); return w == i+1 }, 5*time.Second, time.Millisecond)
	}
	fake.hold.Store(false)
	close(fake.release)
	assert.Equal(t, http.StatusOK, <-first)
	for _, ch := range waiting {
		assert.Equal(t, http.StatusOK, <-ch)
	}
	var shapes []string
	for _, b := range fake.got() {
		var s []string
		for _, r := range b {
			s = append(s, r.Prompt)
		}
		shapes = append(shapes, strings.Join(s, "+"))
	}
	assert.Equal(t, []string{"first", "a+b+d", "c", "e", "f"}, shapes)
	st, _ := ts.api.run.job("d").status()
	assert.Equal(t, 3, st.Batched)
	assert.Equal(t, uint64(20), fake.got()[1][1].Seed, "each request keeps its seed")
	assert.Equal(t, []int{1, 2, 4, 8}, batchSizes(8))
	assert.Equal(t, []int{1}, batchSizes(1))

	// With -max-batch 1 nothing is batched.
	fake2 := newFake()
	fake2.hold.Store(true)
	ts2 := newTestServer(t, fake2, ServerConfig{MaxBatch: 1})
	first = post(ts2, "/v1/images/generations", `{"prompt": "first", "steps": 2}`)
	<-fake2.started
	a, b := post(ts2, "/v1/images/generations", `{"prompt": "a", "steps": 2}`), post(ts2, "/v1/images/generations", `{"prompt": "b", "steps": 2}`)
	require.Eventually(t, func() bool { w, _ := ts2.api.run.counts(); return w == 2 }, 5*time.Second, time.Millisecond)
	close(fake2.release)
	assert.Equal(t, http.StatusOK, <-first)
	assert.Equal(t, http.StatusOK, <-a)
	assert.Equal(t, http.StatusOK, <-b)
	assert.Len(t, fake2.got(), 3)
}

// TestCancel: a client that goes away, a DELETE and an interrupt each end
// their job; a batch stops only when none of its jobs is wanted.
func TestCancel(t *testing.T) {
	fake := newFake()
	fake.hold.Store(true)
	ts := newTestServer(t, fake, ServerConfig{})

	// The client goes away: its job ends, and the backend is canceled.
	req, _ := http.NewRequest("POST", ts.URL+"/v1/images/generations", strings.NewReader(`{"prompt": "x", "steps": 2, "job_id": "gone"}`))
	ctx, cancel := contextWithCancel()
	req = req.WithContext(ctx)
	errc := make(chan error, 1)
	go func() { _, err := http.DefaultClient.Do(req); errc <- err }()
	<-fake.started
	cancel()
	assert.Error(t, <-errc)
	require.Eventually(t, func() bool { return fake.canceled.Load() == 1 }, 5*time.Second, time.Millisecond)
	j := ts.api.run.job("gone")
	<-j.done
	st, _ := j.status()
	assert.Equal(t, jobCanceled, st.State)

	// DELETE /v1/jobs/{id}: the client hears 409 interrupted.
	ch := post(ts, "/v1/images/generations", `{"prompt": "x", "steps": 2, "job_id": "del"}`)
	<-fake.started
	code, _, out := ts.do(t, "DELETE", "/v1/jobs/del", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(out), `"state":"canceled"`)
	assert.Equal(t, http.StatusConflict, <-ch)

	// POST /sdapi/v1/interrupt ends the running job.
	ch = post(ts, "/sdapi/v1/txt2img", `{"prompt": "x", "steps": 2}`)
	<-fake.started
	code, _, out = ts.do(t, "POST", "/sdapi/v1/interrupt", "")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"interrupted": 1}`, string(out))
	assert.Equal(t, http.StatusConflict, <-ch)
	// The answer may leave before the fake's generation has noted that it
	// was cancelled.
	require.Eventually(t, func() bool { return fake.canceled.Load() == 3 }, 5*time.Second, time.Millisecond)
}

// TestProgress: job events while a job runs, OpenAI's stream, A1111's
// progress with its preview, and 429 when the queue is full.
func TestProgress(t *testing.T) {
	fake := newFake()
	fake.hold.Store(true)
	ts := newTestServer(t, fake, ServerConfig{MaxQueue: 1})
	ch := post(ts, "/sdapi/v1/txt2img", `{"prompt": "x", "steps": 4, "force_task_id": "task-1"}`)
	<-fake.started
	code, _, out := ts.do(t, "GET", "/v1/jobs/task-1", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(out), `"state":"running"`)
	code, _, out = ts.do(t, "GET", "/sdapi/v1/progress", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(out), `"job":"task-1"`)

	// The queue holds one: a second waits, a third gets 429.
	queued := post(ts, "/v1/images/generations", `{"prompt": "y", "steps": 4, "size": "8x8"}`)
	require.Eventually(t, func() bool { w, _ := ts.api.run.counts(); return w == 1 }, 5*time.Second, time.Millisecond)
	code, hdr, out := ts.do(t, "POST", "/v1/images/generations", `{"prompt": "z"}`)
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Equal(t, "queue_full", *decodeErr(t, out).Error.Code)
	assert.NotEmpty(t, hdr.Get("Retry-After"))

	resp, err := http.Get(ts.URL + "/v1/jobs/task-1/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	fake.hold.Store(false)
	close(fake.release)
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, name)
		}
	}
	require.NotEmpty(t, events)
	assert.Equal(t, "end", events[len(events)-1])
	assert.Equal(t, http.StatusOK, <-ch)
	assert.Equal(t, http.StatusOK, <-queued)
	code, _, out = ts.do(t, "GET", "/v1/jobs/task-1", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(out), `"state":"done"`)
	assert.Contains(t, string(out), `"progress":1`)

	// OpenAI's stream: progress, partial images, then the images. Steps
	// of 50 ms let the stream see them one by one.
	fake.stepTime = 50 * time.Millisecond
	resp2, err := http.Post(ts.URL+"/v1/images/generations", "application/json",
		strings.NewReader(`{"prompt": "x", "steps": 6, "n": 2, "stream": true, "partial_images": 2}`))
	require.NoError(t, err)
	defer resp2.Body.Close()
	counts := map[string]int{}
	sc = bufio.NewScanner(resp2.Body)
	sc.Buffer(nil, 1<<20)
	last := ""
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			counts[name]++
		}
		if sc.Text() != "" {
			last = sc.Text()
		}
	}
	assert.Equal(t, 2, counts["image_generation.completed"])
	assert.GreaterOrEqual(t, counts["image_generation.progress"], 4, "a progress event a step, or nearly")
	assert.Equal(t, 2, counts["image_generation.partial_image"], "partial_images 2: previews after steps 2 and 4 of 6")
	assert.Equal(t, "data: [DONE]", last)
}

// TestCallback: each finished job is posted to the callback URL, retried
// after a failure.
func TestCallback(t *testing.T) {
	var mu sync.Mutex
	var got []callbackPayload
	calls := 0
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		var p callbackPayload
		json.NewDecoder(r.Body).Decode(&p)
		got = append(got, p)
	}))
	defer recv.Close()
	fake := newFake()
	ts := newTestServer(t, nil, ServerConfig{})
	cb := newCallbacks(recv.URL, "w1", slog.New(slog.DiscardHandler))
	cb.backoff = []time.Duration{time.Millisecond, time.Millisecond}
	ts.api.OnJobEnd(cb.add)
	ts.api.SetReady(fake)
	go cb.run()
	defer cb.finish(0)
	code, _, _ := ts.do(t, "POST", "/v1/images/generations", `{"prompt": "x", "steps": 2, "seed": 9, "job_id": "cb1"}`)
	require.Equal(t, http.StatusOK, code)
	fake.fail = assert.AnError
	code, _, _ = ts.do(t, "POST", "/v1/images/generations", `{"prompt": "x", "steps": 2, "job_id": "cb2"}`)
	require.Equal(t, http.StatusInternalServerError, code)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 }, 5*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, "cb1", got[0].JobID)
	assert.Equal(t, jobDone, got[0].Status)
	assert.Equal(t, "w1", got[0].WorkerID)
	assert.Equal(t, uint64(9), got[0].Seed)
	require.Len(t, got[0].Images, 1)
	_, text := decodePNG(t, got[0].Images[0])
	assert.Contains(t, text, "Seed: 9")
	assert.Equal(t, "cb2", got[1].JobID)
	assert.Equal(t, jobFailed, got[1].Status)
	assert.Contains(t, got[1].Error, "assert.AnError")
	assert.Equal(t, 3, calls, "the first post was retried")
}

// holdingBackend holds its first batch until released: the requests
// that arrive meanwhile queue up and share the next.
type holdingBackend struct {
	Backend
	once    sync.Once
	started chan struct{}
	release chan struct{}
	sizes   chan int
}

func (h *holdingBackend) Generate(ctx context.Context, rs []sd.Request) ([][]*image.RGBA, error) {
	h.once.Do(func() { close(h.started); <-h.release })
	h.sizes <- len(rs)
	return h.Backend.Generate(ctx, rs)
}

// TestRealBatching: with the real pipeline, requests that share a UNet
// batch get the images they get alone.
func TestRealBatching(t *testing.T) {
	h := &holdingBackend{Backend: realBackend(t), started: make(chan struct{}), release: make(chan struct{}), sizes: make(chan int, 16)}
	ts := newTestServer(t, h, ServerConfig{})
	first := post(ts, "/v1/images/generations", `{"prompt": "first", "steps": 2, "size": "4x4"}`)
	<-h.started
	bodies := []string{`{"prompt": "a red cat", "steps": 2, "size": "8x8", "seed": 1, "guidance_scale": 4, "n": 2}`,
		`{"prompt": "a blue dog", "negative_prompt": "grass", "steps": 2, "size": "8x8", "seed": 2, "n": 2}`}
	results := make([]chan []byte, len(bodies))
	for i, body := range bodies {
		results[i] = make(chan []byte, 1)
		go func() {
			_, _, out := ts.do(t, "POST", "/v1/images/generations", body)
			results[i] <- out
		}()
		require.Eventually(t, func() bool { w, _ := ts.api.run.counts(); return w == i+1 }, 5*time.Second, time.Millisecond)
	}
	close(h.release)
	assert.Equal(t, http.StatusOK, <-first)
	var batched [][]openAIImage
	for _, ch := range results {
		var resp openAIImagesResponse
		require.NoError(t, json.Unmarshal(<-ch, &resp))
		assert.Equal(t, 2, resp.Timings.Batched)
		batched = append(batched, resp.Data)
	}
	assert.Equal(t, []int{1, 2}, []int{<-h.sizes, <-h.sizes}, "the first alone, then the two together")
	for i, body := range bodies {
		_, _, out := ts.do(t, "POST", "/v1/images/generations", body)
		var resp openAIImagesResponse
		require.NoError(t, json.Unmarshal(out, &resp))
		assert.Equal(t, 1, resp.Timings.Batched)
		assert.Equal(t, resp.Data, batched[i], "request %d: batched as alone", i)
	}
}

// TestGPUWorker is the image API on the GPU: the tiny model in F32 and
// F16, a batch of two requests against each alone.
func TestGPUWorker(t *testing.T) {
	_, err := candle.HIP(0)
	testenv.Need(t, 2, "a GPU", err)
	for _, dt := range []string{"f32", "f16"} {
		b, err := openBackend(LoadOptions{Path: tinyModel(t), Device: "hip:0", DType: dt})
		require.NoError(t, err)
		assert.Equal(t, "hip:0", b.Info().Device)
		h := &holdingBackend{Backend: b, started: make(chan struct{}), release: make(chan struct{}), sizes: make(chan int, 16)}
		ts := newTestServer(t, h, ServerConfig{})
		first := post(ts, "/v1/images/generations", `{"prompt": "first", "steps": 2, "size": "8x8"}`)
		<-h.started
		bodies := []string{`{"prompt": "a red cat", "steps": 4, "size": "32x32", "seed": 1, "n": 2}`, `{"prompt": "a dog", "steps": 4, "size": "32x32", "seed": 2, "n": 2}`}
		outs := make([]chan []byte, 2)
		for i, body := range bodies {
			outs[i] = make(chan []byte, 1)
			go func() { _, _, out := ts.do(t, "POST", "/v1/images/generations", body); outs[i] <- out }()
			require.Eventually(t, func() bool { w, _ := ts.api.run.counts(); return w == i+1 }, 10*time.Second, time.Millisecond)
		}
		close(h.release)
		require.Equal(t, http.StatusOK, <-first)
		for i, body := range bodies {
			var batched, alone openAIImagesResponse
			require.NoError(t, json.Unmarshal(<-outs[i], &batched))
			_, _, out := ts.do(t, "POST", "/v1/images/generations", body)
			require.NoError(t, json.Unmarshal(out, &alone))
			require.Equal(t, len(alone.Data), len(batched.Data))
			assert.Equal(t, 2, batched.Timings.Batched)
			for k := range alone.Data {
				a, _ := decodePNG(t, alone.Data[k].B64JSON)
				c, _ := decodePNG(t, batched.Data[k].B64JSON)
				diff := maxPixelDiff(a, c)
				t.Logf("%s: request %d image %d: batched against alone, largest 8-bit difference %d", dt, i, k, diff)
				assert.LessOrEqual(t, diff, 2, "%s: request %d image %d", dt, i, k)
			}
		}
		b.Close()
	}
}

func maxPixelDiff(a, b image.Image) int {
	d := 0
	for y := range a.Bounds().Dy() {
		for x := range a.Bounds().Dx() {
			p, q := color.RGBAModel.Convert(a.At(x, y)).(color.RGBA), color.RGBAModel.Convert(b.At(x, y)).(color.RGBA)
			for _, v := range [][2]uint8{{p.R, q.R}, {p.G, q.G}, {p.B, q.B}} {
				d = max(d, abs(int(v[0])-int(v[1])))
			}
		}
	}
	return d
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
