"""Writes this folder from OpenAI's CLIP tokenizer (github.com/openai/CLIP:
clip/simple_tokenizer.py and clip/bpe_simple_vocab_16e6.txt.gz, the
vocabulary every Stable Diffusion text encoder uses):

  vocab.json, merges.txt   the files of a diffusers tokenizer/ folder, cut
                           down to what the prompts below need: every merge
                           the reference looked up while encoding them, in
                           its rank order, and the tokens they make, with
                           their real ids, so that a BPE over these files
                           makes the same choices as over the whole ones
  tokenizer_config.json    SD 1.5's (pad <|endoftext|>)
  golden.json              the reference's ids of each prompt

    python3 make.py CLIP/clip      # the folder holding simple_tokenizer.py

ftfy is replaced by the identity: the prompts need none of its fixes.
"""
import json
import os
import sys
import types

sys.modules["ftfy"] = types.SimpleNamespace(fix_text=lambda s: s)
sys.path.insert(0, sys.argv[1])
import simple_tokenizer as st  # noqa: E402

PROMPTS = [
    "a photo of a cat",
    "A Photograph of an astronaut riding a horse on Mars, highly detailed, 8k, trending on artstation",
    "  masterpiece,   best quality,\tultra-detailed\n(portrait) of a girl; [blue eyes] {red hair} |sunset|",
    "don't stop: it's what we'll do, I'm sure they've said you'd",
    "café crème brûlée naïve façade Ünïcödé",
    "a cat 🐱 and a dog 🐶 in 東京 at 12:30pm, 3.14159 ÷ 2 = 1.57",
    "<|startoftext|>special tokens in text<|endoftext|>",
    "HELLO WORLD hello world HeLLo WoRLD",
    "supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "",
    "   ",
    " ".join(["a very long prompt that goes on and on"] * 12),
]

tok = st.SimpleTokenizer(os.path.join(sys.argv[1], "bpe_simple_vocab_16e6.txt.gz"))
looked = set()


class Ranks(dict):
    def get(self, key, default=None):
        if key in self:
            looked.add(key)
        return dict.get(self, key, default)


tok.bpe_ranks = Ranks(tok.bpe_ranks)
golden = [{"text": p, "ids": tok.encode(p)} for p in PROMPTS]

merges = sorted(looked, key=lambda m: tok.bpe_ranks[m])
vocab = {}
for b in st.bytes_to_unicode().values():
    for t in (b, b + "</w>"):
        vocab[t] = tok.encoder[t]
for a, b in merges:
    vocab[a + b] = tok.encoder[a + b]
for t in ("<|startoftext|>", "<|endoftext|>"):
    vocab[t] = tok.encoder[t]
for g in golden:
    for i in g["ids"]:
        assert tok.decoder[i] in vocab, tok.decoder[i]

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "vocab.json"), "w") as f:
    json.dump(vocab, f, ensure_ascii=False, indent=0, sort_keys=True)
with open(os.path.join(here, "merges.txt"), "w") as f:
    f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
with open(os.path.join(here, "tokenizer_config.json"), "w") as f:
    json.dump({"add_prefix_space": False, "bos_token": "<|startoftext|>", "do_lower_case": True,
               "eos_token": "<|endoftext|>", "model_max_length": 77, "pad_token": "<|endoftext|>",
               "tokenizer_class": "CLIPTokenizer", "unk_token": "<|endoftext|>"}, f, indent=2)
with open(os.path.join(here, "golden.json"), "w") as f:
    json.dump(golden, f, ensure_ascii=False, indent=1)
print(f"{len(merges)} merges, {len(vocab)} tokens", file=sys.stderr)
