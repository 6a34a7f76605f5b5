package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/rocm-go/rocm/internal/worker"
)

// The API's smaller endpoints: one model's card, and vLLM's /tokenize and
// /detokenize.

// fingerprint is system_fingerprint: a hash of the worker's version and
// the model, so that a client sees when either changed (the outputs of
// one seed may then differ).
func fingerprint(version, model string) string {
	h := sha256.Sum256([]byte(version + "\x00" + model))
	return "fp_" + hex.EncodeToString(h[:6])
}

// model answers GET /v1/models/{id}: the card of the model this worker
// serves, a 404 for any other id.
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		worker.MethodNotAllowed(w, r, "GET")
		return
	}
	if id := r.PathValue("id"); id != s.cfg.ModelID {
		worker.WriteError(w, &worker.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: worker.Str("model"), Code: worker.Str("model_not_found"),
			Message: fmt.Sprintf("the model %q is not served here: this worker serves %q", id, s.cfg.ModelID)})
		return
	}
	worker.WriteJSON(w, http.StatusOK, s.card())
}

// tokenizeRequest is POST /tokenize's body: a prompt, or chat messages
// rendered with the model's chat template.
type tokenizeRequest struct {
	Model               *string         `json:"model"`
	Prompt              *string         `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	AddSpecialTokens    *bool           `json:"add_special_tokens"`
}

type tokenizeResponse struct {
	Tokens      []int32 `json:"tokens"`
	Count       int     `json:"count"`
	MaxModelLen int     `json:"max_model_len"`
}

type detokenizeRequest struct {
	Model  *string `json:"model"`
	Tokens []int64 `json:"tokens"`
}

type detokenizeResponse struct {
	Prompt string `json:"prompt"`
}

// tokenize answers POST /tokenize as vLLM does: a prompt's tokens (with
// the BOS token unless add_special_tokens is false), or the tokens of
// messages through the chat template (add_generation_prompt, default
// true, ends with the assistant's header; the template writes the special
// tokens, so add_special_tokens defaults to false there).
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	serveSmall(s, w, r, func(b Backend, req *tokenizeRequest) (any, *worker.Error) {
		if aerr := s.checkModel(&samplingParams{Model: req.Model}); aerr != nil {
			return nil, aerr
		}
		var text string
		special := true
		switch {
		case req.Prompt != nil && !rawIsNull(req.Messages):
			return nil, worker.BadRequest("prompt", "both prompt and messages: send one")
		case req.Prompt != nil:
			text = *req.Prompt
		case !rawIsNull(req.Messages):
			msgs, aerr := parseMessages(req.Messages)
			if aerr != nil {
				return nil, aerr
			}
			gen := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
			var err error
			if text, err = b.ApplyChatTemplate(msgs, gen); err != nil {
				return nil, worker.BadRequest("messages", "the model's chat template rejects these messages: %v", err)
			}
			special = false
		default:
			return nil, worker.BadRequest("prompt", "prompt or messages is missing")
		}
		if req.AddSpecialTokens != nil {
			special = *req.AddSpecialTokens
		}
		ids, err := b.Encode(text, special)
		if err != nil {
			return nil, worker.BadRequest("prompt", "prompt: %v", err)
		}
		if ids == nil {
			ids = []int32{}
		}
		return tokenizeResponse{Tokens: ids, Count: len(ids), MaxModelLen: b.ContextLength()}, nil
	})
}

// detokenize answers POST /detokenize: the text of token ids, special
// tokens included, as vLLM gives it.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	serveSmall(s, w, r, func(b Backend, req *detokenizeRequest) (any, *worker.Error) {
		if aerr := s.checkModel(&samplingParams{Model: req.Model}); aerr != nil {
			return nil, aerr
		}
		if req.Tokens == nil {
			return nil, worker.BadRequest("tokens", "tokens is missing")
		}
		ids := make([]int32, len(req.Tokens))
		for i, id := range req.Tokens {
			if id < 0 || id >= int64(b.VocabSize()) {
				return nil, worker.BadRequest("tokens", "token id %d at %d: want 0 to %d, below the vocabulary size %d", id, i, b.VocabSize()-1, b.VocabSize())
			}
			ids[i] = int32(id)
		}
		return detokenizeResponse{Prompt: b.Decode(ids, false)}, nil
	})
}

// serveSmall reads a POST body as a request R and answers with what
// answer makes of it, once the model has loaded.
func serveSmall[R any](s *Server, w http.ResponseWriter, r *http.Request, answer func(Backend, *R) (any, *worker.Error)) {
	b, req, ok := readPost[R](s, w, r)
	if !ok {
		return
	}
	resp, aerr := answer(b, req)
	if aerr != nil {
		worker.WriteError(w, aerr)
		return
	}
	worker.WriteJSON(w, http.StatusOK, resp)
}
