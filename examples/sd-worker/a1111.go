package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rocm-go/rocm/internal/worker"
)

// a1111Request is /sdapi/v1/txt2img's and /img2img's body: the fields of
// AUTOMATIC1111's API that this worker honours. Others (hires fix,
// restore_faces, scripts, ...) are ignored, as A1111 ignores what its
// scripts do not use.
type a1111Request struct {
	Prompt            string   `json:"prompt"`
	NegativePrompt    string   `json:"negative_prompt"`
	Steps             int      `json:"steps"`
	CFGScale          *float64 `json:"cfg_scale"`
	SamplerName       string   `json:"sampler_name"`
	SamplerIndex      string   `json:"sampler_index"` // the older field
	Seed              *int64   `json:"seed"`
	Width             int      `json:"width"`
	Height            int      `json:"height"`
	BatchSize         int      `json:"batch_size"`
	NIter             int      `json:"n_iter"`
	DenoisingStrength *float64 `json:"denoising_strength"`
	InitImages        []string `json:"init_images"`
	Mask              string   `json:"mask"`
	InpaintingMaskInv int      `json:"inpainting_mask_invert"`
	ForceTaskID       string   `json:"force_task_id"`
	SendImages        *bool    `json:"send_images"`
}

// a1111Response is A1111's answer: the images (PNGs, base64), the request
// as it was run, and info, a JSON string of the settings.
type a1111Response struct {
	Images     []string       `json:"images"`
	Parameters map[string]any `json:"parameters"`
	Info       string         `json:"info"`
}

func (s *Server) a1111Txt2Img(w http.ResponseWriter, r *http.Request, b Backend, run *runner) {
	s.a1111(w, r, b, run, false)
}

func (s *Server) a1111Img2Img(w http.ResponseWriter, r *http.Request, b Backend, run *runner) {
	s.a1111(w, r, b, run, true)
}

func (s *Server) a1111(w http.ResponseWriter, r *http.Request, b Backend, run *runner, img2img bool) {
	var aerr *worker.Error
	var raw json.RawMessage
	if aerr := worker.DecodeJSON(w, r, s.cfg.MaxBodyBytes, &raw); aerr != nil {
		s.reject(w, r, aerr)
		return
	}
	var req a1111Request
	if err := json.Unmarshal(raw, &req); err != nil {
		s.reject(w, r, worker.BadRequest("", "the request body: %v", err))
		return
	}
	g := &genRequest{jobID: req.ForceTaskID, prompt: req.Prompt, negative: req.NegativePrompt, width: req.Width, height: req.Height,
		steps: req.Steps, guidance: req.CFGScale, seed: req.Seed, sampler: req.SamplerName, strength: req.DenoisingStrength,
		maskInvert: req.InpaintingMaskInv == 1}
	g.promptParam, g.sizeParam, g.guidanceParam, g.strengthParam, g.negativeParam = "prompt", "width", "cfg_scale", "denoising_strength", "negative_prompt"
	g.samplerParam, g.countParam, g.initParam, g.maskParam = "sampler_name", "batch_size", "init_images", "mask"
	if g.sampler == "" {
		g.sampler = req.SamplerIndex
	}
	n := max(req.BatchSize, 1) * max(req.NIter, 1)
	if req.BatchSize < 0 || req.NIter < 0 {
		s.reject(w, r, worker.BadRequest("batch_size", "batch_size %d, n_iter %d: want 1 or more", req.BatchSize, req.NIter))
		return
	}
	g.n = n
	if img2img {
		if len(req.InitImages) != 1 {
			s.reject(w, r, worker.BadRequest("init_images", "init_images has %d images: want one", len(req.InitImages)))
			return
		}
		if g.init, aerr = decodeBase64(req.InitImages[0], "init_images"); aerr != nil {
			s.reject(w, r, aerr)
			return
		}
		if req.Mask != "" {
			if g.mask, aerr = decodeBase64(req.Mask, "mask"); aerr != nil {
				s.reject(w, r, aerr)
				return
			}
		}
	} else if len(req.InitImages) > 0 || req.Mask != "" {
		s.reject(w, r, worker.BadRequest("init_images", "txt2img takes no init_images or mask: use /sdapi/v1/img2img"))
		return
	}
	j, aerr := s.check(b, g, r.Context())
	if aerr != nil {
		s.reject(w, r, aerr)
		return
	}
	w.Header().Set("X-Job-Id", j.id)
	if aerr := s.runJob(run, j); aerr != nil {
		s.fail(w, j, aerr)
		return
	}
	imgs, err := pngs(j)
	if err != nil {
		s.fail(w, j, &worker.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()})
		return
	}
	var params map[string]any
	json.Unmarshal(raw, &params)
	params["seed"], params["steps"], params["width"], params["height"] = j.req.Seed, j.req.Steps, j.req.Width, j.req.Height
	params["cfg_scale"], params["sampler_name"] = j.info.CFGScale, j.info.Sampler
	delete(params, "init_images")
	delete(params, "mask")
	resp := a1111Response{Images: []string{}, Parameters: params, Info: a1111Info(j)}
	if req.SendImages == nil || *req.SendImages {
		for _, p := range imgs {
			resp.Images = append(resp.Images, b64(p))
		}
	}
	s.done(j)
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	worker.WriteJSON(w, http.StatusOK, resp)
}

// a1111Info is the response's info: a JSON string, as A1111's.
func a1111Info(j *job) string {
	n := len(j.images)
	seeds := make([]uint64, n)
	texts := make([]string, n)
	for i := range n {
		seeds[i], texts[i] = j.req.Seed, j.info.infotext()
	}
	b, _ := json.Marshal(map[string]any{"prompt": j.info.Prompt, "negative_prompt": j.info.NegativePrompt, "seed": j.req.Seed,
		"all_seeds": seeds, "steps": j.req.Steps, "cfg_scale": j.info.CFGScale, "sampler_name": j.info.Sampler, "width": j.req.Width,
		"height": j.req.Height, "sd_model_name": j.info.Model, "batch_size": n, "infotexts": texts, "denoising_strength": j.info.Strength,
		"job_id": j.id, "warnings": j.warnings, "timings": jobTimings(j)})
	return string(b)
}

// a1111Samplers answers GET /sdapi/v1/samplers.
func (s *Server) a1111Samplers(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		worker.MethodNotAllowed(w, r, "GET")
		return
	}
	out := []map[string]any{}
	for _, sm := range samplers {
		out = append(out, map[string]any{"name": sm.names[0], "aliases": append([]string{string(sm.kind)}, sm.names[1:]...), "options": map[string]string{}})
	}
	worker.WriteJSON(w, http.StatusOK, out)
}

// a1111Models answers GET /sdapi/v1/sd-models with the one model.
func (s *Server) a1111Models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		worker.MethodNotAllowed(w, r, "GET")
		return
	}
	worker.WriteJSON(w, http.StatusOK, []map[string]any{{"title": s.cfg.ModelID, "model_name": s.cfg.ModelID, "hash": nil, "sha256": nil,
		"filename": filepath.Clean(s.cfg.ModelPath), "config": nil}})
}

// a1111Progress answers GET /sdapi/v1/progress: the running job's
// progress (the first, when a batch runs several), with its latest
// preview unless skip_current_image is true.
func (s *Server) a1111Progress(w http.ResponseWriter, r *http.Request, _ Backend, run *runner) {
	skip, _ := strconv.ParseBool(r.URL.Query().Get("skip_current_image"))
	waiting, _ := run.counts()
	cur := run.current()
	body := map[string]any{"progress": 0.0, "eta_relative": 0.0, "current_image": nil, "textinfo": nil,
		"state": map[string]any{"skipped": false, "interrupted": false, "job": "", "job_count": len(cur) + waiting, "job_timestamp": "",
			"job_no": 0, "sampling_step": 0, "sampling_steps": 0}}
	if len(cur) > 0 {
		j := cur[0]
		st, _ := j.status()
		body["progress"], body["eta_relative"] = st.Progress, st.ETA
		body["state"] = map[string]any{"skipped": false, "interrupted": st.State == jobCanceled, "job": j.id, "job_count": len(cur) + waiting,
			"job_timestamp": j.created.Format("20060102150405"), "job_no": 0, "sampling_step": st.Step, "sampling_steps": st.Steps}
		if !skip {
			if img := j.lastPreview(); img != nil {
				if p, err := encodePNG(img, ""); err == nil {
					body["current_image"] = b64(p)
				}
			}
		}
	}
	worker.WriteJSON(w, http.StatusOK, body)
}

// a1111Interrupt answers POST /sdapi/v1/interrupt: the running jobs
// end, their clients told so (409 interrupted).
func (s *Server) a1111Interrupt(w http.ResponseWriter, r *http.Request, _ Backend, run *runner) {
	cur := run.current()
	for _, j := range cur {
		j.cancel(errInterrupted)
	}
	worker.WriteJSON(w, http.StatusOK, map[string]any{"interrupted": len(cur)})
}

// jobEndpoint answers GET /v1/jobs/{id} (the job's status) and DELETE
// /v1/jobs/{id} (cancel it: its client gets 409 interrupted).
func (s *Server) jobEndpoint(w http.ResponseWriter, r *http.Request, _ Backend, run *runner) {
	j, ok := findJob(w, r, run)
	if !ok {
		return
	}
	if r.Method == http.MethodDelete {
		j.cancel(errInterrupted)
		<-j.done
	}
	st, _ := j.status()
	worker.WriteJSON(w, http.StatusOK, st)
}

// jobEvents answers GET /v1/jobs/{id}/events: the job's status as
// server-sent events ("progress"), at each step, until it ends ("end").
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request, _ Backend, run *runner) {
	j, ok := findJob(w, r, run)
	if !ok {
		return
	}
	sse := worker.NewSSE(w, http.NewResponseController(w), s.cfg.WriteTimeout)
	for {
		st, next := j.status()
		ended := st.State != jobQueued && st.State != jobRunning
		name := "progress"
		if ended {
			name = "end"
		}
		if sse.SendEvent(name, st) != nil || ended {
			return
		}
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
	}
}

func findJob(w http.ResponseWriter, r *http.Request, run *runner) (*job, bool) {
	j := run.job(r.PathValue("id"))
	if j == nil {
		worker.WriteError(w, &worker.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: worker.Str("job_not_found"),
			Message: "no job " + r.PathValue("id") + ": it never was, or ended long ago"})
		return nil, false
	}
	return j, true
}
