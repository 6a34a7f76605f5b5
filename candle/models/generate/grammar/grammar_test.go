package grammar_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle/models/generate/grammar"
	"github.com/rocm-go/rocm/errs"
)

// testPieces is a hand-written vocabulary: token 0 is the end of
// sequence (no bytes), then every printable ASCII byte and whitespace,
// bytes that split UTF-8 characters, and multi-byte tokens that span
// JSON structure or start with a space.
func testPieces() [][]byte {
	p := [][]byte{nil}
	for c := 0x20; c < 0x7f; c++ {
		p = append(p, []byte{byte(c)})
	}
	p = append(p, []byte("\n"), []byte("\t"), []byte{0xc3}, []byte{0xa9}, []byte{0xe2}, []byte{0x82}, []byte{0xac}, []byte{0xff})
	for _, s := range []string{`{"`, `":`, `": "`, `"}`, `"},{"`, `", "`, `},`, `],`, `[{`, ` "`, `true`, `false`, `null`,
		"é", "€", "name", "age", "tags", "\n  ", "12", ".5", "e+", `\u00`, `\"`, ` {`, `"]`, `[]`, `{}`, `0.`, `-1`, `"a"`, `"b`} {
		p = append(p, []byte(s))
	}
	return p
}

// schemas are the test schemas, each with documents it takes and refuses.
var schemas = []struct {
	name, schema string
	good, bad    []string
}{
	{"object", `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`,
		[]string{`{"name":"é€","age":-12}`, `{ "name" : "a\"\u00e9" ,"age":0}`}, []string{`{"age":1,"name":"x"}`, `{"name":"x"}`, `{"name":"x","age":1.5}`, `{"name":"x","age":01}`}},
	{"optional", `{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"number"}},"required":["b"]}`,
		[]string{`{"b":null}`, `{"a":true,"b":null,"c":1.5e+3}`, `{"b":null,"c":-0.25}`}, []string{`{}`, `{"a":true}`, `{"c":1,"b":null}`}},
	{"array", `{"type":"array","items":{"type":"string","enum":["red","green","ready"]},"minItems":1,"maxItems":3}`,
		[]string{`["red"]`, `["ready","green","red"]`}, []string{`[]`, `["re"]`, `["red","red","red","red"]`, `["blue"]`}},
	{"anyOf", `{"anyOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind","x"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"b"},"y":{"type":["string","null"]}},"required":["kind","y"],"additionalProperties":false}]}`,
		[]string{`{"kind":"a","x":3}`, `{"kind":"b","y":null}`, `{"kind":"b","y":"q"}`}, []string{`{"kind":"a","y":null}`, `{"kind":"c"}`}},
	{"defs", `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v","kids"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
		[]string{`{"v":1,"kids":[]}`, `{"v":1,"kids":[{"v":2,"kids":[]},{"v":3,"kids":[{"v":4,"kids":[]}]}]}`}, []string{`{"v":1}`, `{"v":1,"kids":[{"v":2}]}`}},
	{"free", `{"type":"object","properties":{"meta":{"type":"object"},"any":{},"list":{"type":"array"}},"required":["meta","any","list"],"additionalProperties":false}`,
		[]string{`{"meta":{"k":[1,{"z":null}]},"any":"s","list":[true,false,{}]}`}, []string{`{"meta":[],"any":1,"list":[]}`}},
	{"scalar", `{"type":"number"}`, []string{`12`, `-0.5e-12`, `0`}, []string{`012`, `1.`, `+1`, `.5`}},
	{"enum", `{"enum":["x",1,null,{"a":[true]}]}`, []string{`"x"`, `1`, `null`, `{"a":[true]}`}, []string{`"y"`, `2`, `{"a":[]}`}},
	{"html key", `{"type":"object","properties":{"a<b&c":{"const":"<>"}},"required":["a<b&c"],"additionalProperties":false}`,
		[]string{`{"a<b&c":"<>"}`}, []string{`{"a\u003cb\u0026c":"<>"}`}},
	{"cycle", `{"$defs":{"x":{"anyOf":[{"$ref":"#/$defs/x"},{"type":"null"}]}},"$ref":"#/$defs/x"}`, []string{`null`}, []string{`1`}},
}

func vocab(t testing.TB) *grammar.Vocab {
	v, err := grammar.NewVocab(testPieces())
	require.NoError(t, err)
	return v
}

func matcher(t testing.TB, g *grammar.Grammar, v *grammar.Vocab) *grammar.Matcher {
	m, err := grammar.NewMatcher(g, v, []int32{0})
	require.NoError(t, err)
	return m
}

func TestDocuments(t *testing.T) {
	v := vocab(t)
	for _, s := range schemas {
		g, err := grammar.CompileSchema([]byte(s.schema))
		require.NoError(t, err, s.name)
		for _, doc := range s.good {
			m := matcher(t, g, v)
			require.NoError(t, m.AcceptString(doc), "%s: %s", s.name, doc)
			assert.True(t, m.Complete(), "%s: %s", s.name, doc)
		}
		for _, doc := range s.bad {
			m := matcher(t, g, v)
			err := m.AcceptString(doc)
			assert.False(t, err == nil && m.Complete(), "%s: %s was taken", s.name, doc)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		schema string
		kind   error
		words  string
	}{
		{`{"type":"string","pattern":"^a"}`, errs.ErrUnsupported, "pattern"},
		{`{"type":"integer","minimum":0}`, errs.ErrUnsupported, "minimum"},
		{`{"type":"string","format":"date"}`, errs.ErrUnsupported, "format"},
		{`{"oneOf":[{"type":"string"}]}`, errs.ErrUnsupported, "oneOf"},
		{`{"type":"object","additionalProperties":{"type":"string"}}`, errs.ErrUnsupported, "additionalProperties"},
		{`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`, errs.ErrArgument, `"b"`},
		{`{"type":"wat"}`, errs.ErrArgument, "wat"},
		{`{"$ref":"#/$defs/missing"}`, errs.ErrArgument, "missing"},
		{`{"type":"array","minItems":3,"maxItems":2}`, errs.ErrArgument, "maxItems"},
		{`{"type":"object","properties":{"me":{"$ref":"#"}},"required":["me"]}`, errs.ErrArgument, "finite"},
		{`{"$defs":{"x":{"anyOf":[{"$ref":"#/$defs/x"}]}},"$ref":"#/$defs/x"}`, errs.ErrArgument, "refers back"},
		{`{"$ref":"#"}`, errs.ErrArgument, "itself"},
		{`{"type":`, errs.ErrArgument, "not valid JSON"},
		{`[]`, errs.ErrArgument, "object"},
	} {
		_, err := grammar.CompileSchema([]byte(c.schema))
		require.Error(t, err, c.schema)
		assert.ErrorIs(t, err, c.kind, c.schema)
		assert.Contains(t, err.Error(), c.words, c.schema)
	}
}

// allowed lists the pieces the matcher's mask allows.
func allowed(t testing.TB, m *grammar.Matcher, v *grammar.Vocab) map[string]bool {
	words := make([]uint32, v.MaskWords())
	n, err := m.Mask(words)
	require.NoError(t, err)
	out := map[string]bool{}
	p := testPieces()
	for id := range v.Size() {
		if words[id/32]>>(id%32)&1 == 1 {
			out[string(p[id])] = true
		}
	}
	assert.Len(t, out, n)
	return out
}

func TestMaskOnTokens(t *testing.T) {
	v := vocab(t)
	g, err := grammar.CompileSchema([]byte(schemas[0].schema))
	require.NoError(t, err)
	m := matcher(t, g, v)
	a := allowed(t, m, v)
	assert.True(t, a["{"])
	assert.True(t, a[`{"`], "a token spanning the brace and the key's quote")
	assert.False(t, a[" {"], "no whitespace before the document")
	assert.False(t, a["["])
	require.NoError(t, m.AcceptString(`{"`))
	a = allowed(t, m, v)
	assert.True(t, a["name"])
	assert.True(t, a["n"])
	assert.False(t, a["age"], "properties come in order")
	require.NoError(t, m.AcceptString(`name`))
	a = allowed(t, m, v)
	assert.True(t, a[`":`])
	assert.True(t, a[`": "`], "a token through the colon, a space and the value's quote")
	assert.False(t, a[`"}`])
	require.NoError(t, m.AcceptString(`": "`))
	a = allowed(t, m, v)
	assert.True(t, a["\xc3"], "a byte that starts a character")
	assert.False(t, a["\xa9"], "a continuation byte alone")
	assert.False(t, a["\xff"])
	assert.True(t, a[`\"`])
	assert.False(t, a["\n"], "no raw newline in a string")
	assert.False(t, a[`"}`], "age is required")
	assert.True(t, a[`", "`])
	require.NoError(t, m.AcceptString("\xc3"))
	a = allowed(t, m, v)
	assert.True(t, a["\xa9"])
	assert.False(t, a["a"], "the character needs its second byte")
	require.NoError(t, m.AcceptString("\xa9\""))
	assert.Error(t, m.Accept(0), "no end before the JSON is complete")
	a = allowed(t, m, v)
	assert.True(t, a[","])
	assert.True(t, a[" "])
	assert.False(t, a[""], "no end of sequence yet")
	require.NoError(t, m.AcceptString(`,"age":12`))
	a = allowed(t, m, v)
	assert.True(t, a["}"])
	assert.True(t, a["12"], "more digits")
	assert.False(t, a["}"+"\n"])
	require.NoError(t, m.AcceptString(`}`))
	assert.True(t, m.Complete())
	assert.True(t, m.Done(), "nothing follows an object")
	a = allowed(t, m, v)
	assert.Equal(t, map[string]bool{"": true}, a, "only the end of sequence")
	require.NoError(t, m.Accept(0))
	a = allowed(t, m, v)
	assert.Empty(t, a)
}

func TestNumberNeedsTheEnd(t *testing.T) {
	v := vocab(t)
	g, err := grammar.CompileSchema([]byte(`{"type":"integer"}`))
	require.NoError(t, err)
	m := matcher(t, g, v)
	require.NoError(t, m.AcceptString("-1"))
	assert.True(t, m.Complete())
	assert.False(t, m.Done(), "a number may go on")
	a := allowed(t, m, v)
	assert.True(t, a[""])
	assert.True(t, a["12"])
	assert.False(t, a[".5"])
	err = m.AcceptString(".")
	require.Error(t, err)
	assert.ErrorIs(t, err, errs.ErrArgument)
	require.NoError(t, m.AcceptString("2"), "a refused text leaves the matcher as it was")
}

func TestJSONObject(t *testing.T) {
	v := vocab(t)
	g := grammar.JSONObject()
	for _, doc := range []string{`{}`, `{"a":[1,{"b":null}],"é":"x"}`, "{\n  \"k\": [true, false]\n}"} {
		m := matcher(t, g, v)
		require.NoError(t, m.AcceptString(doc), doc)
		assert.True(t, m.Done(), doc)
	}
	m := matcher(t, g, v)
	assert.Error(t, m.AcceptString(`[`), "json_object wants an object")
	deep := strings.Repeat(`{"a":`, 32)
	require.NoError(t, m.AcceptString(deep[:len(deep)-5]))
	assert.Error(t, m.AcceptString(`{"a":{`), "nesting is bounded")
}

// validator compiles a schema for the reference validator.
func validator(t testing.TB, schema string) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", doc))
	s, err := c.Compile("schema.json")
	require.NoError(t, err)
	return s
}

// validate checks that text is JSON that the schema takes.
func validate(t testing.TB, s *jsonschema.Schema, text, what string) {
	t.Helper()
	require.True(t, json.Valid([]byte(text)), "%s: not JSON: %q", what, text)
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	require.NoError(t, err)
	require.NoError(t, s.Validate(inst), "%s: %q", what, text)
}

// TestRandomWalks draws random allowed tokens until the grammar is done:
// every document validates against its schema.
func TestRandomWalks(t *testing.T) {
	v := vocab(t)
	p := testPieces()
	words := make([]uint32, v.MaskWords())
	for _, s := range append(schemas, struct {
		name, schema string
		good, bad    []string
	}{name: "json_object"}) {
		g := grammar.JSONObject()
		val := validator(t, `{"type":"object"}`)
		if s.schema != "" {
			var err error
			g, err = grammar.CompileSchema([]byte(s.schema))
			require.NoError(t, err)
			val = validator(t, s.schema)
		}
		done := 0
		for seed := range 40 {
			r := rand.New(rand.NewPCG(uint64(seed), 7))
			m := matcher(t, g, v)
			var out []byte
			for step := 0; step < 3000 && !m.Done(); step++ {
				n, err := m.Mask(words)
				require.NoError(t, err)
				require.Positive(t, n, "%s seed %d: nothing allowed after %q", s.name, seed, out)
				k := r.IntN(n)
				var id int
				for id = range v.Size() {
					if words[id/32]>>(id%32)&1 == 1 {
						if k == 0 {
							break
						}
						k--
					}
				}
				require.NoError(t, m.Accept(int32(id)), "%s seed %d after %q", s.name, seed, out)
				out = append(out, p[id]...)
			}
			if m.Done() {
				done++
				validate(t, val, string(out), fmt.Sprintf("%s seed %d", s.name, seed))
			}
		}
		assert.GreaterOrEqual(t, done, 30, "%s: most walks end", s.name)
	}
}
