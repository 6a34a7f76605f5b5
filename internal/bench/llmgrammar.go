package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/rocm-go/rocm/candle/models/generate"
	"github.com/rocm-go/rocm/candle/models/generate/grammar"
)

// Constrained decoding's cost: the engine's decode with every request
// under a JSON constraint (package grammar) beside the same unconstrained.
// The random model has no tokenizer of a real size, so the token trie is
// built from a synthetic vocabulary of the model's size (SyntheticPieces),
// shaped like a byte-level BPE's: what the mask's cost depends on is the
// trie's size and the bytes of its tokens.

// BenchSchema is the default constraint of the benchmark: an object with
// a string and at least 64 items of an integer and a string, so that a
// constrained generation runs as long as the unconstrained one (a random
// model under json_object may close its object after two tokens).
const BenchSchema = `{"type":"object","properties":{"name":{"type":"string"},"items":{"type":"array","minItems":64,` +
	`"items":{"type":"object","properties":{"id":{"type":"integer"},"text":{"type":"string"},"ok":{"type":"boolean"}},` +
	`"required":["id","text","ok"],"additionalProperties":false}}},"required":["name","items"],"additionalProperties":false}`

// SyntheticPieces makes a vocabulary of n tokens for the token trie, the
// last special of them without bytes (Llama 3: 128256 tokens, 256
// special): the 256 single bytes, then words of 2 to 10 bytes drawn from
// letters (half with a leading space, some capitalised), digits,
// punctuation and JSON's structural pairs ("{\"", "\":", "\",\"", ...), as
// a byte-level BPE vocabulary holds them; no two the same.
func SyntheticPieces(n, special int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 11))
	out := make([][]byte, n)
	seen := map[string]bool{}
	for i := 0; i < min(256, n-special); i++ {
		out[i] = []byte{byte(i)}
		seen[string(out[i])] = true
	}
	structural := []string{`{"`, `":`, `",`, `","`, `":"`, `"}`, `},`, `},{"`, `":[`, `]}`, `":{"`, `\n`, `\"`, `": `, `, "`}
	const letters = "etaoinshrdlcumwfgypbvkjxqz"
	for i := 256; i < n-special; {
		var w []byte
		switch k := r.IntN(20); {
		case k == 0:
			w = []byte(structural[r.IntN(len(structural))])
			for range r.IntN(3) {
				w = append(w, letters[r.IntN(len(letters))])
			}
		case k == 1:
			for range 1 + r.IntN(3) {
				w = append(w, byte('0'+r.IntN(10)))
			}
		default:
			if r.IntN(2) == 0 {
				w = append(w, ' ')
			}
			for j := range 2 + r.IntN(8) {
				c := letters[min(r.IntN(len(letters)), r.IntN(len(letters)))] // frequent letters more often
				if j == 0 && r.IntN(8) == 0 {
					c -= 'a' - 'A'
				}
				w = append(w, c)
			}
		}
		if seen[string(w)] {
			continue
		}
		seen[string(w)] = true
		out[i] = w
		i++
	}
	return out
}

// maskTimer wraps a constraint to time its masks.
type maskTimer struct {
	generate.Constraint
	total *atomic.Int64 // nanoseconds in Mask
	calls *atomic.Int64
}

func (m maskTimer) Mask(words []uint32) (int, error) {
	start := time.Now()
	n, err := m.Constraint.Mask(words)
	m.total.Add(int64(time.Since(start)))
	m.calls.Add(1)
	return n, err
}

// constrainedRun is the benchmark's constraint: the grammar, the trie and
// the stop tokens, and the masks' time.
type constrainedRun struct {
	g            *grammar.Grammar
	v            *grammar.Vocab
	stop         []int32
	total, calls atomic.Int64
}

// newConstrainedRun compiles schema ("json_object" for any object) and
// builds the trie of a synthetic vocabulary of the model's size.
func newConstrainedRun(schema string, vocab int, w io.Writer) (*constrainedRun, error) {
	c := &constrainedRun{}
	if schema == "json_object" {
		c.g = grammar.JSONObject()
	} else {
		g, err := grammar.CompileSchema([]byte(schema))
		if err != nil {
			return nil, fmt.Errorf("llm bench: the constraint: %w", err)
		}
		c.g = g
	}
	special := min(256, vocab/2)
	start := time.Now()
	v, err := grammar.NewVocab(SyntheticPieces(vocab, special, 1))
	if err != nil {
		return nil, err
	}
	c.v = v
	c.stop = []int32{int32(vocab - special + 1)} // Llama 3's <|end_of_text|> at 128001
	fmt.Fprintf(w, "ours: the token trie of a synthetic vocabulary of %d tokens (%d special) in %s\n", vocab, special, msf(time.Since(start)))
	return c, nil
}

// constraint makes one request's constraint.
func (c *constrainedRun) constraint() (generate.Constraint, error) {
	m, err := grammar.NewMatcher(c.g, c.v, c.stop)
	if err != nil {
		return nil, err
	}
	return maskTimer{m, &c.total, &c.calls}, nil
}

// maskTime is the mean time of a mask since the last call, and resets.
func (c *constrainedRun) maskTime() time.Duration {
	t, n := c.total.Swap(0), c.calls.Swap(0)
	if n == 0 {
		return 0
	}
	return time.Duration(t / n)
}
