package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/internal/worker"
	"github.com/rocm-go/rocm/tokenizer"
)

// OpenAI's request and response formats, and the checks that turn a
// request into a generate.Request or a 4xx error.

// Limits on what one request may ask, so that no request costs the worker
// more than its body's size suggests.
const (
	maxStopStrings = 16
	maxStopBytes   = 512
	maxMessages    = 4096
	// maxChoices bounds n: each choice is a sequence of the batch.
	maxChoices = 16
	// maxLogitBias bounds logit_bias's entries.
	maxLogitBias = 1024
)

// samplingParams are the fields both endpoints share.
type samplingParams struct {
	Model               *string          `json:"model"`
	MaxTokens           *int             `json:"max_tokens"`
	MaxCompletionTokens *int             `json:"max_completion_tokens"`
	Temperature         *float64         `json:"temperature"`
	TopP                *float64         `json:"top_p"`
	TopK                *int             `json:"top_k"`
	MinP                *float64         `json:"min_p"`
	RepetitionPenalty   *float64         `json:"repetition_penalty"`
	PresencePenalty     *float64         `json:"presence_penalty"`
	FrequencyPenalty    *float64         `json:"frequency_penalty"`
	Seed                *int64           `json:"seed"`
	Stop                json.RawMessage  `json:"stop"`
	Stream              bool             `json:"stream"`
	StreamOptions       *streamOptions   `json:"stream_options"`
	N                   *int             `json:"n"`
	BestOf              *int             `json:"best_of"`
	Logprobs            json.RawMessage  `json:"logprobs"`
	TopLogprobs         *int             `json:"top_logprobs"`
	Echo                bool             `json:"echo"`
	Suffix              *string          `json:"suffix"`
	Tools               json.RawMessage  `json:"tools"`
	ResponseFormat      *responseFormat  `json:"response_format"`
	LogitBias           *json.RawMessage `json:"logit_bias"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// completionRequest is POST /v1/completions' body.
type completionRequest struct {
	samplingParams
	Prompt json.RawMessage `json:"prompt"`
}

// chatRequest is POST /v1/chat/completions' body.
type chatRequest struct {
	samplingParams
	toolFields
	Messages json.RawMessage `json:"messages"`
}

// rawIsNull reports whether a raw field is absent or null.
func rawIsNull(m json.RawMessage) bool {
	t := bytes.TrimSpace(m)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// parseStop reads stop: a string or a list of strings.
func parseStop(m json.RawMessage) ([]string, *worker.Error) {
	if rawIsNull(m) {
		return nil, nil
	}
	var list []string
	var one string
	if err := json.Unmarshal(m, &one); err == nil {
		list = []string{one}
	} else if err := json.Unmarshal(m, &list); err != nil {
		return nil, worker.BadRequest("stop", "stop: want a string or a list of strings")
	}
	if len(list) > maxStopStrings {
		return nil, worker.BadRequest("stop", "stop: %d strings, at most %d", len(list), maxStopStrings)
	}
	for _, s := range list {
		if s == "" {
			return nil, worker.BadRequest("stop", "stop: an empty string never matches: leave it out")
		}
		if len(s) > maxStopBytes {
			return nil, worker.BadRequest("stop", "stop: a string of %d bytes, at most %d", len(s), maxStopBytes)
		}
	}
	return list, nil
}

// prompt is a completion's prompt: text or token ids.
type prompt struct {
	text string
	ids  []int32
	isID bool
}

// parsePrompt reads prompt: a string, a list of one string, a list of
// token ids, or a list of one list of token ids.
func parsePrompt(m json.RawMessage) (prompt, *worker.Error) {
	if rawIsNull(m) {
		return prompt{}, worker.BadRequest("prompt", "prompt is missing")
	}
	var s string
	if err := json.Unmarshal(m, &s); err == nil {
		if s == "" {
			return prompt{}, worker.BadRequest("prompt", "prompt is empty")
		}
		return prompt{text: s}, nil
	}
	var ids []int64
	if err := json.Unmarshal(m, &ids); err == nil {
		return promptIDs(ids)
	}
	var texts []string
	if err := json.Unmarshal(m, &texts); err == nil {
		if len(texts) != 1 {
			return prompt{}, worker.BadRequest("prompt", "prompt: %d prompts in one request; send one prompt per request", len(texts))
		}
		if texts[0] == "" {
			return prompt{}, worker.BadRequest("prompt", "prompt is empty")
		}
		return prompt{text: texts[0]}, nil
	}
	var lists [][]int64
	if err := json.Unmarshal(m, &lists); err == nil {
		if len(lists) != 1 {
			return prompt{}, worker.BadRequest("prompt", "prompt: %d prompts in one request; send one prompt per request", len(lists))
		}
		return promptIDs(lists[0])
	}
	return prompt{}, worker.BadRequest("prompt", "prompt: want a string, a list of token ids, or a list of one of them")
}

func promptIDs(ids []int64) (prompt, *worker.Error) {
	if len(ids) == 0 {
		return prompt{}, worker.BadRequest("prompt", "prompt is empty")
	}
	p := prompt{ids: make([]int32, len(ids)), isID: true}
	for i, id := range ids {
		if id < 0 || id > 1<<31-1 {
			return prompt{}, worker.BadRequest("prompt", "prompt: token id %d at %d is out of range", id, i)
		}
		p.ids[i] = int32(id)
	}
	return p, nil
}

// chatMessageIn is a message as a client sends it; its content is a
// string, null, or a list of parts of which only text parts are understood.
type chatMessageIn struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	Name         string          `json:"name"`
	ToolCalls    json.RawMessage `json:"tool_calls"`
	ToolCallID   string          `json:"tool_call_id"`
	FunctionCall json.RawMessage `json:"function_call"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// parseMessages reads messages.
func parseMessages(m json.RawMessage) ([]tokenizer.Message, *worker.Error) {
	if rawIsNull(m) {
		return nil, worker.BadRequest("messages", "messages is missing")
	}
	var in []chatMessageIn
	if err := json.Unmarshal(m, &in); err != nil {
		return nil, worker.BadRequest("messages", "messages: want a list of {\"role\", \"content\"} objects")
	}
	if len(in) == 0 {
		return nil, worker.BadRequest("messages", "messages is empty")
	}
	if len(in) > maxMessages {
		return nil, worker.BadRequest("messages", "messages: %d messages, at most %d", len(in), maxMessages)
	}
	out := make([]tokenizer.Message, len(in))
	for i, msg := range in {
		param := fmt.Sprintf("messages[%d]", i)
		switch msg.Role {
		case "system", "user", "assistant", "tool":
		case "developer": // OpenAI's newer name for system
			msg.Role = "system"
		case "":
			return nil, worker.BadRequest(param+".role", "%s.role is missing", param)
		default:
			return nil, worker.BadRequest(param+".role", "%s.role %q: want system, developer, user, assistant or tool", param, msg.Role)
		}
		text, err := parseContent(msg.Content)
		if err != nil {
			return nil, worker.BadRequest(param+".content", "%s.content: %s", param, err.Message)
		}
		out[i] = tokenizer.Message{Role: msg.Role, Content: text}
		if aerr := parseToolMessage(param, msg, &out[i]); aerr != nil {
			return nil, aerr
		}
	}
	return out, nil
}

func parseContent(m json.RawMessage) (string, *worker.Error) {
	if rawIsNull(m) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(m, &s); err == nil {
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(m, &parts); err != nil {
		return "", worker.BadRequest("", "want a string or a list of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", worker.BadRequest("", "a part of type %q: this model reads text parts only", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// seedZero stands for a client's seed 0: the engine reads a zero seed as
// "random", and a client that asks for seed 0 wants it fixed.
const seedZero = 0x9e3779b97f4a7c15

// sampling checks the sampling fields and maps them to the engine's
// settings (OpenAI's defaults: temperature 1, top_p 1).
func (p *samplingParams) sampling() (generate.Sampling, *worker.Error) {
	var s generate.Sampling
	s.Temperature = 1
	if p.Temperature != nil {
		t := *p.Temperature
		if t < 0 || t > 2 {
			return s, worker.BadRequest("temperature", "temperature %g: want 0 (greedy) to 2", t)
		}
		s.Temperature = float32(t)
	}
	if p.TopP != nil {
		t := *p.TopP
		if t <= 0 || t > 1 {
			return s, worker.BadRequest("top_p", "top_p %g: want more than 0 and at most 1", t)
		}
		if t < 1 {
			s.TopP = float32(t)
		}
	}
	if p.TopK != nil {
		k := *p.TopK
		if k < -1 {
			return s, worker.BadRequest("top_k", "top_k %d: want a count ≥ 1, or 0 or -1 for off", k)
		}
		s.TopK = max(k, 0)
	}
	if p.MinP != nil {
		m := *p.MinP
		if m < 0 || m > 1 {
			return s, worker.BadRequest("min_p", "min_p %g: want 0 (off) to 1", m)
		}
		s.MinP = float32(m)
	}
	if p.RepetitionPenalty != nil {
		r := *p.RepetitionPenalty
		if r <= 0 || r > 10 {
			return s, worker.BadRequest("repetition_penalty", "repetition_penalty %g: want more than 0 and at most 10 (1 is off)", r)
		}
		if r != 1 {
			s.RepetitionPenalty = float32(r)
		}
	}
	for name, v := range map[string]*float64{"presence_penalty": p.PresencePenalty, "frequency_penalty": p.FrequencyPenalty} {
		if v != nil && !(*v >= -generate.MaxPenalty && *v <= generate.MaxPenalty) {
			return s, worker.BadRequest(name, "%s %g: want -%d to %d (0 is off)", name, *v, generate.MaxPenalty, generate.MaxPenalty)
		}
	}
	if p.PresencePenalty != nil {
		s.PresencePenalty = float32(*p.PresencePenalty)
	}
	if p.FrequencyPenalty != nil {
		s.FrequencyPenalty = float32(*p.FrequencyPenalty)
	}
	var rawBias json.RawMessage
	if p.LogitBias != nil {
		rawBias = *p.LogitBias
	}
	bias, aerr := parseLogitBias(rawBias)
	if aerr != nil {
		return s, aerr
	}
	s.LogitBias = bias
	if p.Seed != nil {
		s.Seed = uint64(*p.Seed)
		if s.Seed == 0 {
			s.Seed = seedZero
		}
	}
	return s, nil
}

// parseLogitBias reads logit_bias: token ids (as strings, JSON's object
// keys) to biases in [-100, 100]. Ids beyond the vocabulary are
// generate.Check's to refuse.
func parseLogitBias(m json.RawMessage) (map[int32]float32, *worker.Error) {
	if rawIsNull(m) {
		return nil, nil
	}
	var in map[string]float64
	if err := json.Unmarshal(m, &in); err != nil {
		return nil, worker.BadRequest("logit_bias", "logit_bias: want an object of token ids to numbers, as {\"50256\": -100}")
	}
	if len(in) > maxLogitBias {
		return nil, worker.BadRequest("logit_bias", "logit_bias: %d tokens, at most %d", len(in), maxLogitBias)
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[int32]float32, len(in))
	for k, v := range in {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 {
			return nil, worker.BadRequest("logit_bias", "logit_bias: the key %q is not a token id", k)
		}
		if !(v >= -generate.MaxLogitBias && v <= generate.MaxLogitBias) {
			return nil, worker.BadRequest("logit_bias", "logit_bias: %g for token %d: want -%d to %d", v, id, generate.MaxLogitBias, generate.MaxLogitBias)
		}
		out[int32(id)] = float32(v)
	}
	return out, nil
}

// choices reads n: how many completions of the prompt to make.
func (p *samplingParams) choices() (int, *worker.Error) {
	if p.N == nil {
		return 1, nil
	}
	if n := *p.N; n < 1 || n > maxChoices {
		return 0, worker.BadRequest("n", "n %d: want 1 to %d choices", n, maxChoices)
	}
	return *p.N, nil
}

// logprobs reads the log-probability fields. Chat asks with logprobs:
// true and top_logprobs: 0..20; completions with logprobs: 0..20, the
// number of most likely tokens a step (0 is the drawn token's alone).
func (p *samplingParams) logprobs(chat bool) (on bool, top int, _ *worker.Error) {
	if chat {
		if !rawIsNull(p.Logprobs) {
			if err := json.Unmarshal(p.Logprobs, &on); err != nil {
				return false, 0, worker.BadRequest("logprobs", "logprobs: want true or false (the number of most likely tokens is top_logprobs)")
			}
		}
		if p.TopLogprobs != nil {
			top = *p.TopLogprobs
			if top < 0 || top > generate.MaxTopLogProbs {
				return false, 0, worker.BadRequest("top_logprobs", "top_logprobs %d: want 0 to %d", top, generate.MaxTopLogProbs)
			}
			if top > 0 && !on {
				return false, 0, worker.BadRequest("top_logprobs", "top_logprobs needs logprobs: true")
			}
		}
		return on, top, nil
	}
	if p.TopLogprobs != nil {
		return false, 0, worker.BadRequest("top_logprobs", "top_logprobs is chat's: completions take the number as logprobs")
	}
	if rawIsNull(p.Logprobs) {
		return false, 0, nil
	}
	if err := json.Unmarshal(p.Logprobs, &top); err != nil || top < 0 || top > generate.MaxTopLogProbs {
		return false, 0, worker.BadRequest("logprobs", "logprobs: want the number of most likely tokens a step, 0 to %d", generate.MaxTopLogProbs)
	}
	return true, top, nil
}

// unsupported rejects the OpenAI fields this worker cannot honour, rather
// than ignoring them and answering something else than was asked.
func (p *samplingParams) unsupported() *worker.Error {
	if p.BestOf != nil && *p.BestOf != 1 && (p.N == nil || *p.BestOf != *p.N) {
		return worker.BadRequest("best_of", "best_of %d is not supported: the worker returns every choice it makes (ask for them with n)", *p.BestOf)
	}
	if p.Echo {
		return worker.BadRequest("echo", "echo is not supported")
	}
	if p.Suffix != nil && *p.Suffix != "" {
		return worker.BadRequest("suffix", "suffix is not supported")
	}
	return nil
}

// maxTokens is the request's completion budget and the parameter that
// set it: max_completion_tokens, else max_tokens, else def cut to what the
// context leaves after the prompt. A budget the context cannot hold is
// generate.Check's to refuse, as the engine does.
func (p *samplingParams) maxTokens(promptLen, contextLen, def int) (int, string, *worker.Error) {
	param, v := "max_tokens", p.MaxTokens
	if p.MaxCompletionTokens != nil {
		param, v = "max_completion_tokens", p.MaxCompletionTokens
	}
	if v == nil {
		return max(min(def, contextLen-promptLen), 1), param, nil
	}
	if *v <= 0 {
		return 0, param, worker.BadRequest(param, "%s %d: want at least 1", param, *v)
	}
	return *v, param, nil
}

// usage is the token counts of a response.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails is there when part of the prompt came from the
	// prefix cache.
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// promptTokensDetails is OpenAI's breakdown of the prompt tokens.
type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"` // not prefilled again: their KV cache was kept
}

// completionChoice is a choice of /v1/completions, whole or a chunk.
type completionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

// completionResponse is /v1/completions' response and its stream chunks
// (the same object, "text_completion").
type completionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []completionChoice `json:"choices"`
	Usage             *usage             `json:"usage,omitempty"`
}

// chatMessageOut is the assistant's message, whole or a delta.
type chatMessageOut struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []toolCallDelta `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      any             `json:"message,omitempty"` // a *chatMessageOut, or a toolMessage
	Delta        *chatMessageOut `json:"delta,omitempty"`
	Logprobs     *chatLogprobs   `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// chatResponse is /v1/chat/completions' response ("chat.completion") and
// its stream chunks ("chat.completion.chunk").
type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
}

// modelList is /v1/models' response.
type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
}
