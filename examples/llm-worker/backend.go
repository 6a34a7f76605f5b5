package main

import (
	"errors"
	"fmt"
)

// errNoModelBackend is what openBackend says until the LLM packages
// (tokenizer, candle/models/llama, candle/models/generate) are wired in:
// this file is the adapter between them and the Backend interface.
var errNoModelBackend = errors.New("this build of llm-worker has no model backend: backend.go must adapt the tokenizer, candle/models/llama and candle/models/generate packages to Backend")

// openBackend loads the model folder o.Dir on o.Device and starts its
// generation engine.
func openBackend(o LoadOptions) (Backend, error) {
	return nil, fmt.Errorf("loading %s: %w", o.Dir, errNoModelBackend)
}
