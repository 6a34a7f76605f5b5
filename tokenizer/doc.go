// Package tokenizer turns text into the token ids of a large language
// model and back, from the model's Hugging Face tokenizer.json, with the
// results of the Rust tokenizers library on the same file; and it renders
// the model's chat template (a Jinja2 template in tokenizer_config.json)
// as transformers does.
//
// It covers the tokenizers of the Llama 2, Llama 3/3.1/3.2, Mistral and
// Qwen2/2.5 families: BPE models (byte-level like GPT-2 and Llama 3, or
// SentencePiece-style with byte fallback like Llama 2 and Mistral), their
// normalizers, pre-tokenizers, post-processors and decoders, and added and
// special tokens; and the CLIP text tokenizer of Stable Diffusion (a
// diffusers tokenizer/ folder's vocab.json and merges.txt, converted as
// transformers converts them; EncodeWindows makes its 77-token windows).
// A file that needs anything else is an errs.ErrUnsupported
// error that names the field; nothing is silently approximated.
//
//	tk, err := tokenizer.LoadDir("Llama-3.1-8B-Instruct") // tokenizer.json, tokenizer_config.json, ...
//	prompt, err := tk.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: "Hi"}}, true)
//	ids, err := tk.Encode(prompt, false) // the template wrote the BOS already
//	...
//	d := tk.NewStreamDecoder(true)
//	for id := range generated {
//		fmt.Print(d.Add(id)) // whole characters only
//	}
//	fmt.Print(d.Flush())
//	stop := tk.EOS() // <|end_of_text|>, <|eom_id|>, <|eot_id|>
//
// # Encoding
//
// Encode follows the Rust library's pipeline: added tokens are found first
// (longest match at the leftmost position, with their lstrip, rstrip,
// single_word and normalized options), the text between them is
// normalized (NFC, Prepend, Replace, ...), split by the pre-tokenizer
// (Split with its regular expression, ByteLevel, Metaspace, Digits, ...),
// and each piece is encoded by the BPE model, whose results are cached.
// Split patterns are Oniguruma regular expressions in the Rust library;
// here they are compiled with github.com/dlclark/regexp2, whose syntax has
// the lookahead they need, and the patterns of Llama 3, Qwen2 and GPT-2
// are matched by hand-written code that the tests check against regexp2.
//
// # Decoding
//
// Decode runs the decoder chain of the file (ByteLevel, ByteFallback,
// Fuse, Strip, Replace, Metaspace). A StreamDecoder decodes a generated
// sequence token by token and returns only complete characters.
//
// # Chat templates
//
// ApplyChatTemplate runs a small Jinja2 interpreter that implements what
// chat templates use: output, if/elif/else, for loops with loop.*, else
// and filters, set (also on a namespace() and as a block), break and
// continue, comments, whitespace control with trim_blocks and
// lstrip_blocks as transformers sets them, the usual operators, literals,
// subscripts and slices, the common filters (trim, length, tojson,
// default, join, selectattr, map, items, ...), tests (defined, none,
// string, mapping, equalto, ...), string and dict methods,
// raise_exception and strftime_now. A ChatTemplate renders tools and
// tool calls too, as transformers passes them; package toolcall reads the
// calls back out of what the model generates. Anything else (macros, includes, a
// filter it does not know) is an ErrTemplate error naming the construct
// and its line.
package tokenizer
