package generate_test

import (
	"context"
	"fmt"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/generate"
)

// counter is a toy model on the CPU whose next token is the last one plus
// one: a stand-in for *llama.Model.
type counter struct{}

func (counter) Device() candle.Device { return candle.CPU() }
func (counter) VocabSize() int        { return 26 }
func (counter) ContextLength() int    { return 64 }
func (counter) Release(uint64)        {}
func (counter) CacheTokensFree() int  { return 1 << 20 }
func (counter) Forward(seqs []uint64, tokens [][]int32) (*candle.Tensor, error) {
	logits := make([]float32, len(seqs)*26)
	for i, t := range tokens {
		logits[i*26+int(t[len(t)-1]+1)%26] = 10
	}
	return candle.FromSlice(candle.CPU(), logits, len(seqs), 26)
}

// letter decodes token t as the t-th letter.
type letter struct{}

func (letter) Add(id int32) string { return string(rune('a' + id)) }

// An engine streams each request's text as it is drawn; requests submitted
// together share the model's steps.
func ExampleEngine() {
	e, err := generate.NewEngine(counter{}, generate.Config{
		MaxBatch: 8,
		Decoder:  func() generate.StreamDecoder { return letter{} },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	events, err := e.Submit(context.Background(), generate.Request{
		Prompt:      []int32{0, 1, 2}, // "abc"
		MaxTokens:   10,
		StopStrings: []string{"hi"},
		Sampling:    generate.Sampling{Temperature: 0.7, TopP: 0.9, Seed: 1},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for ev := range events {
		fmt.Print(ev.Text)
		if ev.Done {
			fmt.Printf("\nfinish: %s, %d prompt + %d completion tokens\n", ev.FinishReason, ev.PromptTokens, ev.CompletionTokens)
		}
	}
	// Output:
	// defg
	// finish: stop, 3 prompt + 6 completion tokens
}
