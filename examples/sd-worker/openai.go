package main

import (
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rocm-go/rocm/internal/worker"
)

// openAIImageRequest is POST /v1/images/generations' body: OpenAI's
// fields, and the Stable Diffusion ones OpenAI has not.
type openAIImageRequest struct {
	Model          string   `json:"model"`
	Prompt         string   `json:"prompt"`
	N              int      `json:"n"`
	Size           string   `json:"size"`
	ResponseFormat string   `json:"response_format"`
	Stream         bool     `json:"stream"`
	PartialImages  int      `json:"partial_images"`
	NegativePrompt string   `json:"negative_prompt"`
	Steps          int      `json:"steps"`
	GuidanceScale  *float64 `json:"guidance_scale"`
	Seed           *int64   `json:"seed"`
	Sampler        string   `json:"sampler"`
	Scheduler      string   `json:"scheduler"` // the same as sampler
	JobID          string   `json:"job_id"`
}

// openAIImage is one image of a response.
type openAIImage struct {
	B64JSON       string  `json:"b64_json"`
	RevisedPrompt *string `json:"revised_prompt"`
}

// openAIImagesResponse is the images API's answer, with the job's id,
// warnings and timings beside OpenAI's fields.
type openAIImagesResponse struct {
	Created  int64         `json:"created"`
	Data     []openAIImage `json:"data"`
	JobID    string        `json:"job_id"`
	Seed     uint64        `json:"seed"`
	Warnings []string      `json:"warnings,omitempty"`
	Timings  timings       `json:"timings"`
}

func openAIGen(req *openAIImageRequest) (*genRequest, *worker.Error) {
	if f := strings.ToLower(req.ResponseFormat); f != "" && f != "b64_json" {
		return nil, worker.BadRequest("response_format", "response_format %q: this worker answers b64_json only (it keeps no files to serve URLs from)", req.ResponseFormat)
	}
	w, h, err := parseSize(req.Size)
	if err != nil {
		return nil, worker.BadRequest("size", "%v", err)
	}
	sampler := req.Sampler
	if sampler == "" {
		sampler = req.Scheduler
	}
	if req.PartialImages < 0 || req.PartialImages > 3 {
		return nil, worker.BadRequest("partial_images", "partial_images %d: want 0 to 3", req.PartialImages)
	}
	g := &genRequest{jobID: req.JobID, model: req.Model, prompt: req.Prompt, negative: req.NegativePrompt, width: w, height: h, steps: req.Steps,
		guidance: req.GuidanceScale, seed: req.Seed, sampler: sampler, n: req.N, preview: req.Stream && req.PartialImages > 0}
	g.openAINames()
	return g, nil
}

func (g *genRequest) openAINames() {
	g.promptParam, g.sizeParam, g.guidanceParam, g.strengthParam, g.negativeParam = "prompt", "size", "guidance_scale", "strength", "negative_prompt"
	g.samplerParam, g.countParam, g.initParam, g.maskParam = "sampler", "n", "image", "mask"
}

// openAIGenerations answers POST /v1/images/generations.
func (s *Server) openAIGenerations(w http.ResponseWriter, r *http.Request, b Backend, run *runner) {
	var req openAIImageRequest
	if aerr := worker.DecodeJSON(w, r, s.cfg.MaxBodyBytes, &req); aerr != nil {
		s.reject(w, r, aerr)
		return
	}
	g, aerr := openAIGen(&req)
	if aerr != nil {
		s.reject(w, r, aerr)
		return
	}
	s.openAIRun(w, r, b, run, g, req.Stream, req.PartialImages)
}

// openAIEdits answers POST /v1/images/edits: a multipart form with the
// image, an optional mask (its transparent pixels are repainted; without
// one the whole image is, at strength), the prompt and the other fields
// as form values.
func (s *Server) openAIEdits(w http.ResponseWriter, r *http.Request, b Backend, run *runner) {
	g, stream, partial, aerr := s.readEditForm(w, r)
	if aerr != nil {
		s.reject(w, r, aerr)
		return
	}
	s.openAIRun(w, r, b, run, g, stream, partial)
}

// readEditForm reads the edits endpoint's multipart form.
func (s *Server) readEditForm(w http.ResponseWriter, r *http.Request) (*genRequest, bool, int, *worker.Error) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		return nil, false, 0, worker.BadRequest("", "want a multipart/form-data body (image, mask, prompt, ...), as OpenAI's edits endpoint takes")
	}
	body, aerr := worker.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if aerr != nil {
		return nil, false, 0, aerr
	}
	_, ps, _ := strings.Cut(r.Header.Get("Content-Type"), "boundary=")
	mr := multipart.NewReader(strings.NewReader(string(body)), strings.Trim(ps, `"`))
	form := map[string]string{}
	files := map[string][]byte{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, 0, worker.BadRequest("", "the multipart body: %v", err)
		}
		data, err := io.ReadAll(part)
		if err != nil {
			return nil, false, 0, worker.BadRequest("", "the multipart body: %v", err)
		}
		name := strings.TrimSuffix(part.FormName(), "[]")
		if part.FileName() != "" || name == "image" || name == "mask" {
			if _, dup := files[name]; dup && name == "image" {
				return nil, false, 0, worker.BadRequest("image", "one image only: this worker edits one image a request")
			}
			files[name] = data
		} else {
			form[name] = string(data)
		}
	}
	img, ok := files["image"]
	if !ok {
		return nil, false, 0, worker.BadRequest("image", "image is missing: send the image to edit as a file field")
	}
	req := openAIImageRequest{Model: form["model"], Prompt: form["prompt"], Size: form["size"], ResponseFormat: form["response_format"],
		NegativePrompt: form["negative_prompt"], Sampler: form["sampler"], Scheduler: form["scheduler"], JobID: form["job_id"]}
	var strength *float64
	for _, f := range []struct {
		name string
		dst  any
	}{{"n", &req.N}, {"steps", &req.Steps}, {"guidance_scale", &req.GuidanceScale}, {"seed", &req.Seed}, {"strength", &strength},
		{"stream", &req.Stream}, {"partial_images", &req.PartialImages}} {
		v, ok := form[f.name]
		if !ok || v == "" {
			continue
		}
		if aerr := formValue(f.name, v, f.dst); aerr != nil {
			return nil, false, 0, aerr
		}
	}
	g, aerr := openAIGen(&req)
	if aerr != nil {
		return nil, false, 0, aerr
	}
	g.init, g.strength = img, strength
	if m, ok := files["mask"]; ok {
		g.mask, g.maskAlpha = m, true
	}
	return g, req.Stream, req.PartialImages, nil
}

// formValue parses a form field into dst (*int, **float64, **int64,
// *bool).
func formValue(name, v string, dst any) *worker.Error {
	var err error
	switch d := dst.(type) {
	case *int:
		*d, err = strconv.Atoi(v)
	case **float64:
		var f float64
		f, err = strconv.ParseFloat(v, 64)
		*d = &f
	case **int64:
		var n int64
		n, err = strconv.ParseInt(v, 10, 64)
		*d = &n
	case *bool:
		*d, err = strconv.ParseBool(v)
	}
	if err != nil {
		return worker.BadRequest(name, "%s %q: not a valid value", name, v)
	}
	return nil
}

// openAIRun runs a checked request and answers in the images API's
// shape, or, with stream, as server-sent events: progress events
// ("image_generation.progress", with a preview image as
// "image_generation.partial_image" where partial_images asks for them)
// and "image_generation.completed" with each image.
func (s *Server) openAIRun(w http.ResponseWriter, r *http.Request, b Backend, run *runner, g *genRequest, stream bool, partial int) {
	j, aerr := s.check(b, g, r.Context())
	if aerr != nil {
		s.reject(w, r, aerr)
		return
	}
	w.Header().Set("X-Job-Id", j.id)
	if stream {
		s.streamJob(w, r, run, j, partial)
		return
	}
	if aerr := s.runJob(run, j); aerr != nil {
		s.fail(w, j, aerr)
		return
	}
	imgs, err := pngs(j)
	if err != nil {
		s.fail(w, j, &worker.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()})
		return
	}
	resp := openAIImagesResponse{Created: time.Now().Unix(), JobID: j.id, Seed: j.req.Seed, Warnings: j.warnings, Timings: jobTimings(j)}
	for _, p := range imgs {
		resp.Data = append(resp.Data, openAIImage{B64JSON: b64(p)})
	}
	s.done(j)
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	worker.WriteJSON(w, http.StatusOK, resp)
}

// streamJob runs j and streams its progress, then its images.
func (s *Server) streamJob(w http.ResponseWriter, r *http.Request, run *runner, j *job, partial int) {
	result := make(chan *worker.Error, 1)
	go func() { result <- s.runJob(run, j) }()
	sse := worker.NewSSE(w, http.NewResponseController(w), s.cfg.WriteTimeout)
	sent := 0 // previews
	every := max(j.req.Steps/(partial+1), 1)
	for {
		st, next := j.status()
		select {
		case aerr := <-result:
			if aerr != nil {
				s.logFailure(j, aerr)
				sse.SendEvent("error", map[string]any{"type": "error", "error": aerr})
				return
			}
			imgs, err := pngs(j)
			if err != nil {
				sse.SendEvent("error", map[string]any{"type": "error", "error": &worker.Error{Type: "server_error", Message: err.Error()}})
				return
			}
			for i, p := range imgs {
				if sse.SendEvent("image_generation.completed", map[string]any{"type": "image_generation.completed", "b64_json": b64(p), "index": i,
					"created_at": time.Now().Unix(), "job_id": j.id, "seed": j.req.Seed, "warnings": j.warnings, "timings": jobTimings(j)}) != nil {
					return
				}
			}
			s.done(j)
			sse.Done()
			return
		default:
		}
		if err := sse.SendEvent("image_generation.progress", map[string]any{"type": "image_generation.progress", "job_id": j.id, "state": st.State,
			"step": st.Step, "steps": st.Steps, "progress": st.Progress, "eta_s": st.ETA}); err != nil {
			j.cancel(fmt.Errorf("the client stopped reading: %w", err))
			<-result
			return
		}
		if partial > 0 && sent < partial && st.Step >= (sent+1)*every && st.Step < st.Steps {
			if img := j.lastPreview(); img != nil {
				if p, err := encodePNG(img, ""); err == nil {
					sse.SendEvent("image_generation.partial_image", map[string]any{"type": "image_generation.partial_image", "b64_json": b64(p),
						"partial_image_index": sent, "job_id": j.id})
					sent++
				}
			}
		}
		select {
		case <-next:
		case <-r.Context().Done():
		case aerr := <-result:
			result <- aerr
		}
	}
}

// reject answers a request refused before it became a job, and logs it.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, aerr *worker.Error) {
	s.log.InfoContext(r.Context(), "request refused", "method", r.Method, "path", r.URL.Path, "status", aerr.Status, "err", aerr.Message)
	worker.WriteError(w, aerr)
}

// fail answers a job that did not finish.
func (s *Server) fail(w http.ResponseWriter, j *job, aerr *worker.Error) {
	s.logFailure(j, aerr)
	if aerr.Status == 499 { // the client has gone: nothing to write
		return
	}
	worker.WriteError(w, aerr)
}

func (s *Server) logFailure(j *job, aerr *worker.Error) {
	s.log.WarnContext(j.ctx, "job ended without images", "job", j.id, "status", aerr.Status, "err", aerr.Message)
}

// done logs a finished job.
func (s *Server) done(j *job) {
	t := jobTimings(j)
	s.log.InfoContext(j.ctx, "job done", "job", j.id, "images", len(j.images), "size", fmt.Sprintf("%dx%d", j.req.Width, j.req.Height), "steps", j.req.Steps,
		"batched", t.Batched, "queued", time.Duration(t.Queued*1e9).Round(time.Millisecond), "took", time.Duration(t.Total*1e9).Round(time.Millisecond),
		"it_per_s", fmt.Sprintf("%.2f", t.ItPerS))
}
