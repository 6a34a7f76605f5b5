package tokenizer

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"

	"github.com/rocm-go/rocm/errs"
)

// The test tokenizers (testdata, written by hand to the shapes of the
// real files):
//
//   - llama3: byte-level BPE, Llama 3's split regex, ignore_merges, merges
//     as "a b" strings, <|begin_of_text|> added by the post-processor.
//   - qwen2: the same vocabulary with NFC, Qwen2's split regex (single
//     digits), no ignore_merges, merges as ["a", "b"] pairs, no BOS.
//   - gpt2.json: the same vocabulary, ByteLevel's own regex.
//   - llama2: SentencePiece-style BPE, Prepend("▁") + Replace(" ", "▁"),
//     byte fallback, <s> added.
//   - mistral: the same model with a Metaspace pre-tokenizer (prepend
//     scheme "first") and decoder, and [INST] [/INST] added tokens.
//   - unk.json: llama2 without byte fallback: unknown characters are <unk>.
//
// In the byte-level vocabulary a byte's id is its value; the merges are
// (rank: pair -> id) 0: Ġ t -> 256, 1: h e -> 257, 2: Ġt he -> 258,
// 3: Ġ Ġ -> 259, 4: i n -> 260, 5: Ġ in -> 261, 6: 1 2 -> 262,
// 7: 12 3 -> 263, 8: ' s -> 264, 9: Ċ Ċ -> 265, 10: e r -> 266,
// 11: Ġ h -> 267, 12: Ġh e -> 268, 13: ĠĠ ĠĠ -> 269, 14: l l -> 270,
// 15: Ġhe ll -> 271, 16: Ġhell o -> 272; "Ġworld" is 273 with no merge.
//
// In the SentencePiece vocabulary <unk> <s> </s> are 0 1 2, <0xNN> is
// 3+NN, ▁ is 259, a..z 260..285, 0..9 286..295, . , ! ? ' 296..300, 好 301,
// and the merges are 0: ▁ h -> 302, 1: l l -> 303, 2: ▁h e -> 304,
// 3: ▁he ll -> 305, 4: ▁hell o -> 306, 5: ▁ w -> 307, 6: o r -> 308,
// 7: ▁w or -> 309, 8: ▁wor l -> 310, 9: ▁worl d -> 311, 10: ▁ ▁ -> 312,
// 11: e r -> 313, 12: ▁ 好 -> 314.

func loadT(t testing.TB, name string) *Tokenizer {
	t.Helper()
	p := filepath.Join("testdata", name)
	var tk *Tokenizer
	var err error
	if strings.HasSuffix(name, ".json") {
		tk, err = Load(p)
	} else {
		tk, err = LoadDir(p)
	}
	require.NoError(t, err)
	return tk
}

func enc(t *testing.T, tk *Tokenizer, s string, special bool) []int32 {
	t.Helper()
	ids, err := tk.Encode(s, special)
	require.NoError(t, err, "%q", s)
	return ids
}

var (
	sp   = func(b byte) int32 { return 3 + int32(b) } // SentencePiece <0xNN>
	emoj = []int32{240, 159, 152, 128}                // 😀 as byte-level ids
)

func TestEncodeByteLevel(t *testing.T) {
	l3, qw, g2 := loadT(t, "llama3"), loadT(t, "qwen2"), loadT(t, "gpt2.json")
	cases := []struct {
		text           string
		llama3, qwen2  []int32
		gpt2SameAsQwen bool
	}{
		{"", []int32{}, []int32{}, true},
		{"the", []int32{116, 257}, []int32{116, 257}, true},
		{" the", []int32{258}, []int32{258}, true},
		{"there", []int32{116, 257, 114, 101}, []int32{116, 257, 114, 101}, true}, // h+e first, e+r is stale
		// ignore_merges: Llama 3 takes a whole word from the vocabulary
		// even when the merges would not build it.
		{" hello", []int32{272}, []int32{32, 257, 270, 111}, true},
		{" world", []int32{273}, []int32{32, 119, 111, 114, 108, 100}, true},
		{" in", []int32{261}, []int32{261}, true},
		{"a  b", []int32{97, 32, 32, 98}, []int32{97, 32, 32, 98}, true},
		{"a   b", []int32{97, 259, 32, 98}, []int32{97, 259, 32, 98}, true},
		{"a     b", []int32{97, 269, 32, 98}, []int32{97, 269, 32, 98}, true},
		{"hi  ", []int32{104, 105, 259}, []int32{104, 105, 259}, true},
		{"a\n\nb", []int32{97, 265, 98}, []int32{97, 265, 98}, false},
		{"a \n b", []int32{97, 32, 10, 32, 98}, []int32{97, 32, 10, 32, 98}, false},
		{"\n\n\n\n", []int32{265, 265}, []int32{265, 265}, true},
		{"he's", []int32{257, 264}, []int32{257, 264}, true},
		{"HE'S", []int32{72, 69, 39, 83}, []int32{72, 69, 39, 83}, true},
		// Llama 3 splits digits in threes, Qwen2 one by one, GPT-2 not.
		{"12345", []int32{263, 52, 53}, []int32{49, 50, 51, 52, 53}, false},
		{"1212", []int32{262, 49, 50}, []int32{49, 50, 49, 50}, false},
		{"😀", emoj, emoj, true},
		{"hi 😀", append([]int32{104, 105, 32}, emoj...), append([]int32{104, 105, 32}, emoj...), true},
		{"你好", []int32{228, 189, 160, 229, 165, 189}, []int32{228, 189, 160, 229, 165, 189}, true},
		// NFC: Qwen2 composes e + U+0301 into é (C3 A9).
		{"e\u0301", []int32{101, 204, 129}, []int32{195, 169}, false},
	}
	for _, c := range cases {
		assert.Equal(t, c.llama3, enc(t, l3, c.text, false), "llama3 %q", c.text)
		assert.Equal(t, c.qwen2, enc(t, qw, c.text, false), "qwen2 %q", c.text)
		if c.gpt2SameAsQwen {
			assert.Equal(t, c.qwen2, enc(t, g2, c.text, false), "gpt2 %q", c.text)
		}
	}
	assert.Equal(t, []int32{263, 52, 53}, enc(t, g2, "12345", false)) // one piece: 1 2 -> 12, 12 3 -> 123
	assert.Equal(t, []int32{262, 262}, enc(t, g2, "1212", false))
	assert.Equal(t, []int32{97, 10, 10, 98}, enc(t, g2, "a\n\nb", false)) // GPT-2's regex splits \n\n
}

func TestSpecialTokensByteLevel(t *testing.T) {
	l3, qw := loadT(t, "llama3"), loadT(t, "qwen2")
	assert.Equal(t, []int32{274, 104, 105, 276}, enc(t, l3, "<|begin_of_text|>hi<|eot_id|>", false))
	assert.Equal(t, []int32{104, 105, 32, 276, 258, 114, 101}, enc(t, l3, "hi <|eot_id|> there", false))
	assert.Equal(t, []int32{97, 280, 98}, enc(t, l3, "a<extra>b", false))
	// Longest match first; an unfinished token is plain text.
	assert.Equal(t, []int32{60, 124, 101, 111, 116, 95, 105, 100, 124}, enc(t, l3, "<|eot_id|", false))
	assert.Equal(t, []int32{274, 104, 105}, enc(t, l3, "hi", true))
	assert.Equal(t, []int32{274}, enc(t, l3, "", true))
	assert.Equal(t, []int32{104, 105}, enc(t, qw, "hi", true)) // Qwen2 adds no BOS
	assert.Equal(t, []int32{275, 117, 115, 266, 10, 104, 105, 276}, enc(t, qw, "<|im_start|>user\nhi<|im_end|>", false))

	assert.Equal(t, "<|begin_of_text|>hi<|eot_id|>", l3.Decode([]int32{274, 104, 105, 276}, false))
	assert.Equal(t, "hi", l3.Decode([]int32{274, 104, 105, 276}, true))
	assert.Equal(t, "a<extra>b", l3.Decode([]int32{97, 280, 98}, true)) // not special: kept
	assert.True(t, l3.IsSpecial(276))
	assert.False(t, l3.IsSpecial(280))
	assert.False(t, l3.IsSpecial(104))
}

func TestEncodeSentencePiece(t *testing.T) {
	l2, ms, unk := loadT(t, "llama2"), loadT(t, "mistral"), loadT(t, "unk.json")
	cases := []struct {
		text    string
		llama2  []int32
		mistral []int32 // nil: same as llama2
	}{
		{"", []int32{}, nil},
		{"hello world", []int32{306, 311}, nil},
		{"hello  world", []int32{306, 259, 311}, nil},
		{"hello", []int32{306}, nil},
		{"好", []int32{314}, nil},
		{"😀", []int32{259, sp(0xF0), sp(0x9F), sp(0x98), sp(0x80)}, nil},
		{"你好", []int32{259, sp(0xE4), sp(0xBD), sp(0xA0), 301}, nil},
		{"there", []int32{259, 279, 267, 313, 264}, nil},
		{" ", []int32{312}, []int32{259}}, // Metaspace "first" adds no ▁ before a leading ▁
		// Llama 2's legacy normalizer prefixes every piece, also after a
		// special token; Metaspace "first" only the start of the text.
		{"<s>hello", []int32{1, 306}, []int32{1, 267, 264, 303, 274}},
		{"hello</s>", []int32{306, 2}, nil},
	}
	for _, c := range cases {
		assert.Equal(t, c.llama2, enc(t, l2, c.text, false), "llama2 %q", c.text)
		want := c.mistral
		if want == nil {
			want = c.llama2
		}
		assert.Equal(t, want, enc(t, ms, c.text, false), "mistral %q", c.text)
	}
	assert.Equal(t, []int32{1, 306, 311}, enc(t, l2, "hello world", true))
	assert.Equal(t, []int32{1}, enc(t, l2, "", true))
	assert.Equal(t, []int32{315, 306, 259, 316}, enc(t, ms, "[INST] hello [/INST]", false))

	// Without byte fallback, unknown characters are <unk>, fused.
	assert.Equal(t, []int32{302, 0, 264}, enc(t, unk, "h😀😀e", false))
	u2 := loadT(t, "unk.json")
	u2.model.fuseUnk = false
	assert.Equal(t, []int32{302, 0, 0, 264}, enc(t, u2, "h😀😀e", false))

	assert.Equal(t, "hello world", l2.Decode([]int32{306, 311}, false))
	assert.Equal(t, "<s> hello world", l2.Decode([]int32{1, 306, 311}, false))
	assert.Equal(t, "hello world", l2.Decode([]int32{1, 306, 311, 2}, true))
	assert.Equal(t, "你好", l2.Decode([]int32{259, sp(0xE4), sp(0xBD), sp(0xA0), 301}, false))
	assert.Equal(t, "hello world", ms.Decode([]int32{306, 311}, false))
	assert.Equal(t, "<s> hello", ms.Decode([]int32{1, 306}, false))
	assert.Equal(t, "[INST] hello [/INST]", ms.Decode([]int32{315, 306, 259, 316}, false))
	// An invalid byte run: one U+FFFD per byte, as the Rust library does.
	assert.Equal(t, "a\uFFFD\uFFFDb", l2.Decode([]int32{260, sp(0xE4), sp(0xBD), 261}, false))
}

func TestDecodeByteLevelInvalid(t *testing.T) {
	l3 := loadT(t, "llama3")
	assert.Equal(t, "\uFFFD", l3.Decode([]int32{240, 159}, false)) // one maximal subpart
	assert.Equal(t, "\uFFFDh", l3.Decode([]int32{240, 104}, false))
	assert.Equal(t, "\uFFFD\uFFFD", l3.Decode([]int32{128, 128}, false))
	assert.Equal(t, "ab", l3.Decode([]int32{97, 999999, -1, 98}, false)) // unknown ids are left out
}

func TestLossyString(t *testing.T) {
	cases := map[string]string{
		"abc":              "abc",
		"\xF0\x9F\x98\x80": "😀",
		"\xF0\x9F":         "\uFFFD",
		"\xF0\x9Fa":        "\uFFFDa",
		"\xE2\x82":         "\uFFFD",
		"\xE0\x80":         "\uFFFD\uFFFD", // E0 needs A0..BF next
		"\xED\xA0\x80":     "\uFFFD\uFFFD\uFFFD",
		"\xC0\xAF":         "\uFFFD\uFFFD",
		"\xF4\x90\x80\x80": "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\x80\xBF":         "\uFFFD\uFFFD",
		"a\xF1\x80\x80":    "a\uFFFD",
	}
	for in, want := range cases {
		assert.Equal(t, want, lossyString(in), "%q", in)
	}
	assert.True(t, incompleteTail("a\xF0\x9F\x98"))
	assert.True(t, incompleteTail("\xE2"))
	assert.False(t, incompleteTail("\xE2\x82\xAC"))
	assert.False(t, incompleteTail("\x80"))
	assert.False(t, incompleteTail("\xC0"))
	assert.False(t, incompleteTail("\xE0\x80")) // can never be completed
	assert.False(t, incompleteTail(""))
}

func TestPreTokenizerPieces(t *testing.T) {
	l3, qw, g2 := loadT(t, "llama3"), loadT(t, "qwen2"), loadT(t, "gpt2.json")
	pieces := func(tk *Tokenizer, s string) []string {
		var out []string
		for _, p := range tk.pre.split(nil, piece{s: s, first: true}) {
			require.True(t, p.byteLevel) // mapped by the model
			out = append(out, p.s)
		}
		return out
	}
	// What the Rust library's Oniguruma gives with these patterns.
	assert.Equal(t, []string{"HE", "'S", " can", "'T"}, pieces(l3, "HE'S can'T"))
	assert.Equal(t, []string{"I", "'m", " here", "'ll", "'d", "'ve", "'re"}, pieces(l3, "I'm here'll'd've're"))
	assert.Equal(t, []string{"a", " ", " b"}, pieces(l3, "a  b"))
	assert.Equal(t, []string{"x", "  \n\n", "  ", " y"}, pieces(l3, "x  \n\n   y"))
	assert.Equal(t, []string{"123", "456", "7", " ", "89"}, pieces(l3, "1234567 89"))
	assert.Equal(t, []string{"1", "2", " ", "3"}, pieces(qw, "12 3"))
	assert.Equal(t, []string{"x", " +=", " (", "y", ");\n"}, pieces(l3, "x += (y);\n"))
	assert.Equal(t, []string{"‘hi", "’", " ", "\u00a0é", "\t", "\tend"}, pieces(l3, "‘hi’ \u00a0é\t\tend"))
	assert.Equal(t, []string{"\u3000你好", "，世界"}, pieces(l3, "\u3000你好，世界"))
	assert.Equal(t, []string{"HE", "'", "S", " can", "'", "T"}, pieces(g2, "HE'S can'T")) // GPT-2's regex is case-sensitive
	assert.Equal(t, []string{"a", "\n", "\n", "b"}, pieces(g2, "a\n\nb"))
}

func TestSplitBehaviors(t *testing.T) {
	p := &pattern{literal: "-"}
	segs := patternSegments("a-b--c", p, false)
	got := func(b behavior, invert bool) []string {
		var out []string
		for _, x := range splitSegments(nil, piece{s: "a-b--c"}, patternSegments("a-b--c", p, invert), b) {
			out = append(out, x.s)
		}
		return out
	}
	assert.Len(t, segs, 6)
	assert.Equal(t, []string{"a", "b", "c"}, got(removed, false))
	assert.Equal(t, []string{"a", "-", "b", "-", "-", "c"}, got(isolated, false))
	assert.Equal(t, []string{"a-", "b-", "-", "c"}, got(mergedWithPrevious, false))
	assert.Equal(t, []string{"a", "-b", "-", "-c"}, got(mergedWithNext, false))
	assert.Equal(t, []string{"a", "-", "b", "--", "c"}, got(contiguous, false))
	assert.Equal(t, []string{"-", "-", "-"}, got(removed, true))

	d := digitsPre{}
	var out []string
	for _, x := range d.split(nil, piece{s: "ab123c4"}) {
		out = append(out, x.s)
	}
	assert.Equal(t, []string{"ab", "123", "c", "4"}, out)
	out = nil
	for _, x := range (digitsPre{individual: true}).split(nil, piece{s: "a12"}) {
		out = append(out, x.s)
	}
	assert.Equal(t, []string{"a", "1", "2"}, out)

	m := metaspacePre{rep: "▁", scheme: prependAlways, split_: true}
	out = nil
	for _, x := range m.split(nil, piece{s: "hi  there"}) {
		out = append(out, x.s)
	}
	assert.Equal(t, []string{"▁hi", "▁", "▁there"}, out)
}

func TestAddedTokenOptions(t *testing.T) {
	toks := []*addedToken{
		{ID: 1, Content: "<a>", LStrip: true},
		{ID: 2, Content: "<b>", RStrip: true},
		{ID: 3, Content: "cat", SingleWord: true},
		{ID: 4, Content: "<a>x"},
	}
	set := newAddedSet(toks, []string{"<a>", "<b>", "cat", "<a>x"})
	type span struct {
		s  string
		id int32
	}
	split := func(s string) []span {
		var out []span
		set.split(s, func(x string, _ int, id int32) { out = append(out, span{x, id}) })
		return out
	}
	assert.Equal(t, []span{{"x", -1}, {"  <a>", 1}, {" y", -1}}, split("x  <a> y"))
	assert.Equal(t, []span{{"x ", -1}, {"<b>  ", 2}, {"y", -1}}, split("x <b>  y"))
	assert.Equal(t, []span{{"a ", -1}, {"cat", 3}, {" b concat cats", -1}}, split("a cat b concat cats"))
	assert.Equal(t, []span{{"<a>x", 4}, {"y", -1}}, split("<a>xy"))
	assert.Equal(t, []span{{"<b>\n  ", 2}, {"<a>", 1}}, split("<b>\n  <a>"))
}

func TestLoadDirConfig(t *testing.T) {
	l3 := loadT(t, "llama3")
	bos, ok := l3.BOS()
	assert.True(t, ok)
	assert.Equal(t, int32(274), bos)
	assert.Equal(t, []int32{276, 275, 279}, l3.EOS()) // config first, then generation_config, no repeats
	assert.Equal(t, 281, l3.VocabSize())

	qw := loadT(t, "qwen2")
	_, ok = qw.BOS()
	assert.False(t, ok, "Qwen2's bos_token is null")
	assert.Equal(t, []int32{276, 274}, qw.EOS())
	assert.Equal(t, 277, qw.VocabSize())

	l2 := loadT(t, "llama2")
	bos, ok = l2.BOS()
	assert.True(t, ok)
	assert.Equal(t, int32(1), bos)
	assert.Equal(t, []int32{2}, l2.EOS())
	assert.Equal(t, 315, l2.VocabSize())

	// Load alone: BOS from the post-processor, no EOS, no template.
	f, err := Load("testdata/llama3/tokenizer.json")
	require.NoError(t, err)
	bos, ok = f.BOS()
	assert.True(t, ok)
	assert.Equal(t, int32(274), bos)
	assert.Empty(t, f.EOS())
	_, err = f.ApplyChatTemplate([]Message{{Role: "user", Content: "hi"}}, true)
	assert.ErrorIs(t, err, ErrNoChatTemplate)

	id, ok := l3.TokenID("<|eot_id|>")
	assert.True(t, ok)
	assert.Equal(t, int32(276), id)
	id, ok = l3.TokenID("Ġthe")
	assert.True(t, ok)
	assert.Equal(t, int32(258), id)
	_, ok = l3.TokenID("nope")
	assert.False(t, ok)
	s, ok := l3.Token(258)
	assert.True(t, ok)
	assert.Equal(t, "Ġthe", s)
	s, ok = l3.Token(280)
	assert.True(t, ok)
	assert.Equal(t, "<extra>", s)
	_, ok = l3.Token(281)
	assert.False(t, ok)
	_, ok = l3.Token(-1)
	assert.False(t, ok)
}

func TestApplyChatTemplateLoaded(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
	cases := map[string]string{
		"llama3": "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
		"qwen2":  "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
		"llama2": "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]",
		// chat_template.jinja
		"mistral": "<s>[INST] Be brief.\n\nHi[/INST]",
	}
	for name, want := range cases {
		tk := loadT(t, name)
		got, err := tk.ApplyChatTemplate(msgs, true)
		require.NoError(t, err, name)
		assert.Equal(t, want, got, name)
	}
	// The rendered prompt encodes to the special tokens, with addSpecial
	// false (it holds the BOS already).
	l3 := loadT(t, "llama3")
	prompt, err := l3.ApplyChatTemplate([]Message{{Role: "user", Content: "hi"}}, true)
	require.NoError(t, err)
	ids := enc(t, l3, prompt, false)
	assert.Equal(t, int32(274), ids[0])
	assert.Equal(t, []int32{277, 97, 115, 115, 105, 115, 116, 97, 110, 116, 278, 265}, ids[len(ids)-12:])
	assert.Equal(t, prompt, l3.Decode(ids, false))
}

func TestEncodeInvalidUTF8(t *testing.T) {
	l3 := loadT(t, "llama3")
	_, err := l3.Encode("ab\xffc", false)
	require.Error(t, err)
	assert.ErrorIs(t, err, errs.ErrArgument)
	assert.Contains(t, err.Error(), "byte 2 is 0xFF")
}

func TestLongInput(t *testing.T) {
	for _, name := range []string{"llama3", "qwen2", "llama2", "mistral"} {
		tk := loadT(t, name)
		text := strings.Repeat("hello world, the 12345 cats 😀 你好!\n", 3000) // ~120 KB
		ids := enc(t, tk, text, false)
		assert.Greater(t, len(ids), 30000, name)
		assert.Equal(t, text, tk.Decode(ids, false), name)
	}
	// One long word (SentencePiece BPE has no pre-tokenizer: the whole
	// text is one word).
	l2 := loadT(t, "llama2")
	ids := enc(t, l2, strings.Repeat("a", 100000), false)
	assert.Len(t, ids, 100001) // ▁ and 100000 a's: no merge joins a's
}

// roundTrips reports whether Decode(Encode(s)) must give back s itself
// (or its NFC form, for Qwen2).
func roundTrips(name, s string) bool {
	switch name {
	case "llama2", "mistral":
		if strings.Contains(s, "▁") || strings.Contains(s, "<s>") || strings.Contains(s, "</s>") ||
			strings.Contains(s, "<unk>") || strings.Contains(s, "[INST]") || strings.Contains(s, "[/INST]") {
			return false // ▁ decodes as a space; pieces after an added token gain a ▁
		}
		if name == "mistral" && strings.HasPrefix(s, " ") {
			return false // Metaspace "first" drops a leading space, as in the Rust library
		}
	}
	return true
}

var testTokenizers = []string{"llama3", "qwen2", "gpt2.json", "llama2", "mistral"}

func checkRoundTrip(t *testing.T, tk *Tokenizer, name, s string) {
	ids, err := tk.Encode(s, false)
	if !utf8.ValidString(s) {
		if !errors.Is(err, errs.ErrArgument) {
			t.Fatalf("%s: invalid UTF-8 %q: err %v", name, s, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %q: %v", name, s, err)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= tk.VocabSize() {
			t.Fatalf("%s: %q: id %d out of range", name, s, id)
		}
	}
	got := tk.Decode(ids, false)
	want := s
	if name == "qwen2" {
		want = norm.NFC.String(s)
	}
	if roundTrips(name, s) && got != want {
		t.Fatalf("%s: %q encodes to %v, which decodes to %q", name, s, ids, got)
	}
	checkStream(t, tk, name, ids)
}

// checkStream: the stream's text is Decode's.
func checkStream(t *testing.T, tk *Tokenizer, name string, ids []int32) {
	for _, skip := range []bool{false, true} {
		d := tk.NewStreamDecoder(skip)
		var sb strings.Builder
		for _, id := range ids {
			out := d.Add(id)
			if !utf8.ValidString(out) {
				t.Fatalf("%s: stream gave invalid UTF-8 %q", name, out)
			}
			sb.WriteString(out)
		}
		sb.WriteString(d.Flush())
		want := lossyString(tk.decode(ids, skip, true))
		full := tk.Decode(ids, skip)
		if !strings.ContainsRune(full, utf8.RuneError) && want != full {
			t.Fatalf("%s: raw decode %q differs from Decode %q for %v", name, want, full, ids)
		}
		if sb.String() != want {
			t.Fatalf("%s: stream of %v gave %q, decode %q", name, ids, sb.String(), want)
		}
	}
}

var fuzzAlphabet = []string{"a", "b", "h", "e", "l", "o", "t", "r", "w", "d", "H", "E", "S", " ", " ", "  ", "\n", "\r\n", "\t",
	"'", "'s", "'T", "1", "2", "3", "12345", ".", ",", "!", "😀", "你", "好", "é", "e\u0301", "\u00a0", "\u3000", "▁",
	"<s>", "</s>", "<|eot_id|>", "<|begin_of_text|>", "<|im_start|>", "<extra>", "[INST]", "<0x41>", "<", "|", "\u200d", "ﬁ"}

func TestRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range testTokenizers {
		tk := loadT(t, name)
		for range 2000 {
			var sb strings.Builder
			for range rng.IntN(12) {
				sb.WriteString(fuzzAlphabet[rng.IntN(len(fuzzAlphabet))])
			}
			checkRoundTrip(t, tk, name, sb.String())
		}
	}
}

func TestStreamDecoderExamples(t *testing.T) {
	l3, l2, ms := loadT(t, "llama3"), loadT(t, "llama2"), loadT(t, "mistral")
	stream := func(tk *Tokenizer, ids []int32, skip bool) []string {
		d := tk.NewStreamDecoder(skip)
		var out []string
		for _, id := range ids {
			out = append(out, d.Add(id))
		}
		return append(out, d.Flush())
	}
	assert.Equal(t, []string{"", "", "", "😀", ""}, stream(l3, emoj, false))
	assert.Equal(t, []string{"h", "i", " ", "", "", "", "😀", ""}, stream(l3, append([]int32{104, 105, 32}, emoj...), false))
	assert.Equal(t, []string{"", "h", "i", ""}, stream(l3, []int32{274, 104, 105}, true))
	assert.Equal(t, []string{"<|begin_of_text|>", "h", "i", ""}, stream(l3, []int32{274, 104, 105}, false))
	// Llama 2: the leading space is dropped at the start only.
	assert.Equal(t, []string{"hello", " world", ""}, stream(l2, []int32{306, 311}, false))
	assert.Equal(t, []string{"hello", " ", "", "", "", "😀", ""},
		stream(l2, []int32{306, 259, sp(0xF0), sp(0x9F), sp(0x98), sp(0x80)}, false))
	assert.Equal(t, []string{"", "hello", " world", ""}, stream(l2, []int32{1, 306, 311}, true))
	assert.Equal(t, []string{"<s>", " hello", ""}, stream(l2, []int32{1, 306}, false))
	assert.Equal(t, []string{"hello", " world", "!", ""}, stream(ms, []int32{306, 311, 298}, false))
	// An unfinished character comes out of Flush as U+FFFD.
	assert.Equal(t, []string{"a", "", "\uFFFD"}, stream(l3, []int32{97, 240}, false))
}

func FuzzEncodeDecode(f *testing.F) {
	for _, s := range []string{"", "hello world", "a  b\n\nc", "he's 12345 😀 你好", "<|eot_id|>x<s>", "\xff", "e\u0301 ▁x"} {
		f.Add(s)
	}
	tks := make([]*Tokenizer, len(testTokenizers))
	for i, name := range testTokenizers {
		tks[i] = loadT(f, name)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, tk := range tks {
			checkRoundTrip(t, tk, testTokenizers[i], s)
		}
	})
}

// FuzzStreamDecoder: any id sequence, valid or not as text.
func FuzzStreamDecoder(f *testing.F) {
	f.Add([]byte{1, 2, 3, 240, 159, 152, 128})
	f.Add([]byte{0xE4, 0xBD, 0xA0, 0xE4, 0x41})
	tks := make([]*Tokenizer, len(testTokenizers))
	for i, name := range testTokenizers {
		tks[i] = loadT(f, name)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i, tk := range tks {
			ids := make([]int32, 0, len(b)/2)
			for k := 0; k+1 < len(b); k += 2 {
				ids = append(ids, int32(int(b[k])<<8|int(b[k+1]))%int32(tk.VocabSize()+2)-1)
			}
			checkStream(t, tk, testTokenizers[i], ids)
		}
	})
}

func TestMalformedFiles(t *testing.T) {
	base, err := os.ReadFile("testdata/gpt2.json")
	require.NoError(t, err)
	dir := t.TempDir()
	n := 0
	write := func(s string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("t%d.json", n))
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	edit := func(old, new string) string {
		require.Contains(t, string(base), old)
		return write(strings.Replace(string(base), old, new, 1))
	}
	cases := []struct {
		path       string
		kind       error
		wantFields []string
	}{
		{write(`{"model": `), errs.ErrFormat, []string{"not valid tokenizer JSON"}},
		{write(`[1, 2]`), errs.ErrFormat, []string{"not valid tokenizer JSON"}},
		{write(`{}`), errs.ErrFormat, []string{"model: missing"}},
		{write(`{"model": {"type": "WordPiece", "vocab": {}}}`), errs.ErrUnsupported, []string{"model.type", `"WordPiece" is not supported`}},
		{write(`{"model": {"type": "Unigram", "vocab": []}}`), errs.ErrUnsupported, []string{"model.type", "Unigram"}},
		{write(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}`), errs.ErrFormat, []string{"model.merges[0]", `token "b" is not in model.vocab`}},
		{write(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}}`), errs.ErrFormat, []string{"model.merges[0]", `"ab", is not in model.vocab`}},
		{write(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a  b"]}}`), errs.ErrFormat, []string{"model.merges[0]", "not two tokens"}},
		{write(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b", "c"]]}}`), errs.ErrFormat, []string{"model.merges[0]", "has 3 tokens"}},
		{write(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}}`), errs.ErrFormat, []string{"model.vocab", "id 0 is given to both"}},
		{write(`{"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}}`), errs.ErrFormat, []string{"model.vocab", "negative id"}},
		{write(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": 5}}`), errs.ErrFormat, []string{"model.merges"}},
		{write(`{"model": {"type": "BPE", "vocab": {"a": 0}}}`), errs.ErrFormat, []string{"model.merges: missing"}},
		{write(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "<unk>"}}`), errs.ErrFormat, []string{"model.unk_token", "not in model.vocab"}},
		{write(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1}}`), errs.ErrUnsupported, []string{"model.dropout"}},
		{edit(`"pre_tokenizer": {`, `"pre_tokenizer": {"type": "Whitespace"}, "x": {`), errs.ErrUnsupported, []string{"pre_tokenizer.type", `"Whitespace" is not supported`}},
		{edit(`"normalizer": null`, `"normalizer": {"type": "Precompiled", "precompiled_charsmap": "AA=="}`), errs.ErrUnsupported, []string{"normalizer.type", "Precompiled"}},
		{edit(`"normalizer": null`, `"normalizer": {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"Regex": "(?<"}, "content": ""}]}`), errs.ErrFormat, []string{"normalizer.normalizers[0].pattern.Regex", "cannot compile"}},
		{edit(`"normalizer": null`, `"normalizer": {"prepend": "x"}`), errs.ErrFormat, []string{"normalizer", `no "type"`}},
		{edit(`"pre_tokenizer": {`, `"pre_tokenizer": {"type": "Sequence", "pretokenizers": [null, {"type": "Split", "behavior": "Isolated"}]}, "x": {`), errs.ErrFormat, []string{"pre_tokenizer.pretokenizers[1].pattern: missing"}},
		{edit(`"decoder": {`, `"decoder": {"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Replace", "pattern": {"String": "x"}}]}, "x": {`), errs.ErrFormat, []string{"decoder.decoders[1].content: missing"}},
		{edit(`"post_processor": {`, `"post_processor": {"type": "Sequence", "processors": [{"type": "ByteLevel"}, null, {"type": "Bert"}]}, "x": {`), errs.ErrUnsupported, []string{"post_processor.processors[2].type", `"Bert" is not supported`}},
		{edit(`"decoder": {`, `"decoder": {"type": "WordPiece"}, "x": {`), errs.ErrUnsupported, []string{"decoder.type", "WordPiece"}},
		{edit(`"post_processor": {`, `"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}], "special_tokens": {}}, "x": {`), errs.ErrFormat, []string{"post_processor.single[0]", `"<s>" is not in`}},
		{edit(`"added_tokens": [`, `"added_tokens": [{"id": 5, "content": ""}, `), errs.ErrFormat, []string{"added_tokens[0]", "no content"}},
		{edit(`"added_tokens": [`, `"added_tokens": [{"id": 274, "content": "<other>"}, `), errs.ErrFormat, []string{"added_tokens[1].id", "274 is also the id"}},
	}
	for _, c := range cases {
		_, err := Load(c.path)
		if !assert.Error(t, err, c.wantFields) {
			continue
		}
		assert.ErrorIs(t, err, c.kind, err.Error())
		var te *Error
		if assert.ErrorAs(t, err, &te) {
			assert.Equal(t, "Load", te.Op)
			assert.Equal(t, c.path, te.Path)
		}
		for _, w := range c.wantFields {
			assert.Contains(t, err.Error(), w)
		}
	}
	_, err = Load(filepath.Join(dir, "missing.json"))
	assert.ErrorIs(t, err, errs.ErrIO)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = LoadDir(dir)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestMalformedConfig(t *testing.T) {
	tokJSON, err := os.ReadFile("testdata/llama3/tokenizer.json")
	require.NoError(t, err)
	cases := []struct {
		file, content, want string
	}{
		{"tokenizer_config.json", `{"bos_token": 5}`, "bos_token: neither a string"},
		{"tokenizer_config.json", `{"eos_token": "<nope>"}`, `eos_token: "<nope>" is not a token`},
		{"tokenizer_config.json", `{"chat_template": 3}`, "chat_template: neither a string"},
		{"tokenizer_config.json", `{"chat_template": [{"name": "x", "template": "y"}]}`, `without one named "default"`},
		{"tokenizer_config.json", `{"eos_token": `, "not valid JSON"},
		{"generation_config.json", `{"eos_token_id": "x"}`, "eos_token_id: neither a token id"},
		{"generation_config.json", `{"eos_token_id": [1, 99999]}`, "99999 is not a token id"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), tokJSON, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, c.file), []byte(c.content), 0o644))
		_, err := LoadDir(dir)
		if assert.Error(t, err, c.content) {
			assert.ErrorIs(t, err, errs.ErrFormat)
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), c.file)
		}
	}
	// A template this package cannot parse: LoadDir works, the template
	// call says why.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), tokJSON, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("{% macro x() %}{% endmacro %}"), 0o644))
	tk, err := LoadDir(dir)
	require.NoError(t, err)
	_, err = tk.ApplyChatTemplate(nil, true)
	assert.ErrorIs(t, err, ErrTemplate)
	assert.ErrorContains(t, err, "line 1: unsupported statement 'macro'")
}

func TestConcurrentEncode(t *testing.T) {
	l3 := loadT(t, "llama3")
	want := enc(t, l3, "hello world, the cat's 12345 😀", true)
	done := make(chan []int32)
	for range 8 {
		go func() {
			var last []int32
			for range 200 {
				last, _ = l3.Encode("hello world, the cat's 12345 😀", true)
			}
			done <- last
		}()
	}
	for range 8 {
		assert.Equal(t, want, <-done)
	}
}

func BenchmarkEncode(b *testing.B) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog's 12345 kennels; 你好, 😀!\n", 60) // ~4 KB
	for _, name := range []string{"llama3", "qwen2", "llama2"} {
		tk := loadT(b, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tk.Encode(text, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeStream(b *testing.B) {
	tk := loadT(b, "llama3")
	ids, _ := tk.Encode(strings.Repeat("The quick brown fox 😀 你好!\n", 100), false)
	b.ReportAllocs()
	for b.Loop() {
		d := tk.NewStreamDecoder(true)
		for _, id := range ids {
			d.Add(id)
		}
	}
}

// slowMatches lists the matches of a pattern with regexp2 alone.
func slowMatches(p *pattern, s string) [][2]int {
	slow := &pattern{re: p.re}
	var out [][2]int
	slow.matches(s, func(a, b int) { out = append(out, [2]int{a, b}) })
	return out
}

func fastMatches(p *pattern, s string) [][2]int {
	var out [][2]int
	p.matches(s, func(a, b int) { out = append(out, [2]int{a, b}) })
	return out
}

var splitAlphabet = []string{"a", "Z", "é", "ß", "你", "\u0301", "1", "٣", "½", "Ⅷ", " ", " ", "  ", "\t", "\n", "\r", "\v", "\f",
	"\u0085", "\u00a0", "\u2028", "\u3000", "\u200b", ".", "!", "+", "'", "'s", "'S", "'t", "'re", "'RE", "'Ve", "'m", "'ll", "'lL", "'d", "'x",
	"😀", "_", "-", "\x00", "ſ"}

func TestFastSplitMatchesRegexp2(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, src := range []string{llama3Split, qwen2Split, gpt2Split} {
		p, err := compilePattern("x", nil, &src)
		require.NoError(t, err)
		require.NotNil(t, p.fast)
		for range 20000 {
			var sb strings.Builder
			for range rng.IntN(10) {
				sb.WriteString(splitAlphabet[rng.IntN(len(splitAlphabet))])
			}
			s := sb.String()
			require.Equal(t, slowMatches(p, s), fastMatches(p, s), "%q on %q", src, s)
		}
	}
}

func FuzzFastSplit(f *testing.F) {
	for _, s := range []string{"he's  12345\n\n x", "'S'T\r\n \u00a0é", "😀 ٣½ '"} {
		f.Add(s)
	}
	var pats []*pattern
	for _, src := range []string{llama3Split, qwen2Split, gpt2Split} {
		p, err := compilePattern("x", nil, &src)
		require.NoError(f, err)
		pats = append(pats, p)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		for _, p := range pats {
			if a, b := slowMatches(p, s), fastMatches(p, s); !assert.Equal(t, a, b, "%q", s) {
				return
			}
		}
	})
}

// TestPieces: the pieces of a text's tokens spell the text, byte-level
// and SentencePiece (its leading space kept, byte fallback for
// characters outside the vocabulary) alike; special tokens have none.
func TestPieces(t *testing.T) {
	for _, c := range []struct{ dir, lead string }{{"testdata/llama3", ""}, {"testdata/llama2", " "}} {
		tok, err := LoadDir(c.dir)
		require.NoError(t, err)
		pieces := tok.Pieces()
		require.Len(t, pieces, tok.VocabSize())
		text := `héllo wörld {"a": [1, 2]} 😀`
		ids, err := tok.Encode(text, false)
		require.NoError(t, err)
		var got []byte
		for _, id := range ids {
			got = append(got, pieces[id]...)
		}
		assert.Equal(t, c.lead+text, string(got), c.dir)
		if bos, ok := tok.BOS(); ok {
			assert.Nil(t, pieces[bos], c.dir)
		}
	}
}
