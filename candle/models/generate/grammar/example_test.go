package grammar_test

import (
	"fmt"
	"strings"

	"github.com/rocm-go/rocm/candle/models/generate/grammar"
)

// A schema compiled once, a matcher per generation: before each step the
// mask says which tokens may come, and each token drawn advances it.
func Example() {
	g, err := grammar.CompileSchema([]byte(`{"type": "object", "properties": {"ok": {"type": "boolean"}},
		"required": ["ok"], "additionalProperties": false}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	// A toy vocabulary: token 0 ends the sequence (no bytes).
	pieces := [][]byte{nil, []byte(`{"`), []byte(`ok`), []byte(`":`), []byte(` true`), []byte(`}`), []byte(`maybe`)}
	v, err := grammar.NewVocab(pieces)
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := grammar.NewMatcher(g, v, []int32{0})
	if err != nil {
		fmt.Println(err)
		return
	}
	words := make([]uint32, v.MaskWords())
	var out []string
	for !m.Done() {
		m.Mask(words)
		for id := range pieces {
			if words[0]>>id&1 == 1 { // the first allowed token, as greedy decoding of a model might
				out = append(out, fmt.Sprintf("%q", pieces[id]))
				if err := m.Accept(int32(id)); err != nil {
					fmt.Println(err)
					return
				}
				break
			}
		}
	}
	fmt.Println(strings.Join(out, " "))
	_, err = grammar.CompileSchema([]byte(`{"type": "string", "pattern": "^a+$"}`))
	fmt.Println(err)
	// Output:
	// "{\"" "ok" "\":" " true" "}"
	// grammar: CompileSchema: #: unsupported keyword pattern: constrained decoding takes type, properties, required, additionalProperties, items, minItems, maxItems, enum, const, anyOf and $ref
}
