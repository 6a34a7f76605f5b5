// Package grammar constrains a language model's output to JSON: a JSON
// schema (CompileSchema) or any JSON object (JSONObject) is compiled into
// a Grammar, and a Matcher follows one generation through it, giving
// before each step the set of vocabulary tokens that may come next as a
// bitmask (Mask) and advancing with each token drawn (Accept), as
// llguidance and XGrammar do.
//
// The matcher is a byte-level pushdown automaton over the JSON text (a
// stack of frames, one per object, array or scalar being read; an anyOf
// forks it), and the vocabulary is a trie of the tokens' bytes built once
// per tokenizer (NewVocab, FromTokenizer): a mask is a walk of the trie
// that advances the automaton a byte an edge and prunes a subtree at the
// first byte it refuses, so that tokens spanning JSON structure ("\":",
// "},{"), tokens with leading spaces and byte tokens that split a UTF-8
// character are all judged on their exact bytes. A grammar caches the
// mask of each state it has seen, per vocabulary: a generation keeps
// returning to the same states (inside a string, after a comma), so that
// most steps copy a cached mask.
//
// The output follows a fixed policy, so that every generation is finite
// and every value representable: objects' properties come in the
// schema's order (optional ones may be left out); whitespace is allowed
// between tokens (after '{', '[', ',' and ':', and before ',', ':', '}'
// and ']') in runs of at most 12 bytes of space, tab and newline, and
// never before or after the document; objects and arrays nest at most
// 32 deep; a number's integer part has at most 16 digits, its fraction
// 16 and its exponent 3; strings are valid UTF-8 with JSON's escapes. A
// stop token (end of sequence) is allowed only once the document is
// complete, and a document that nothing may follow (an object, array,
// string or literal) is Done at its last byte.
//
// Numeric bounds (minimum, maximum, multipleOf), string formats, patterns
// and lengths, and oneOf, allOf and not are refused with an error that
// names the keyword (errs.ErrUnsupported), never ignored.
package grammar
