#!/usr/bin/python3
"""gen_tiny.py — writes two small tokenizer.json files cut from the Qwen3
tokenizer in this folder, for tests of the code paths Qwen3 does not use.

Run from this folder: /usr/bin/python3 gen_tiny.py
Then make their golden ids with Hugging Face tokenizers (see hf_encode.js):
  NODE_PATH=$SCRATCH/node_modules node hf_encode.js tiny_llama3.json tiny_texts.jsonl > tiny_llama3_cases.jsonl
  NODE_PATH=$SCRATCH/node_modules node hf_encode.js tiny_gpt2.json tiny_texts.jsonl > tiny_gpt2_cases.jsonl

Both keep Qwen3's first 3000 merges and the tokens they need, renumbered.
- tiny_llama3.json: NFC normalizer, Split with Llama 3's regex, ByteLevel
  (use_regex false), ignore_merges true, merges as ["a", "b"], and added
  tokens exercising special/lstrip/rstrip/single_word/normalized.
- tiny_gpt2.json: no normalizer, ByteLevel pre-tokenizer with use_regex and
  add_prefix_space true, merges as "a b" strings.
"""
import json

LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

src = json.load(open('../qwen3/tokenizer.json', encoding='utf-8'))
qvocab = src['model']['vocab']
id2tok = {v: k for k, v in qvocab.items()}
merges = [m if isinstance(m, list) else m.split(' ') for m in src['model']['merges'][:3000]]

# The 256 single-byte tokens first (in Qwen3's order), then merge results.
vocab = {}
for i in range(256):
    vocab[id2tok[i]] = len(vocab)
for a, b in merges:
    assert a in vocab and b in vocab, (a, b)
    if a + b not in vocab:
        vocab[a + b] = len(vocab)
n = len(vocab)

def bytelevel(**kw):
    d = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    d.update(kw)
    return d

def added(i, content, special=False, lstrip=False, rstrip=False, single_word=False, normalized=False):
    return {"id": n + i, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}

llama3 = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [
        added(0, "<|begin|>", special=True),
        added(1, "<mask>", special=True, lstrip=True, rstrip=True),
        added(2, "word", single_word=True, normalized=True),
        added(3, "cafe\u0301", normalized=True),
        added(4, "<|begin|>x"),
    ],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated", "invert": False},
        bytelevel(use_regex=False)]},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    "decoder": bytelevel(),
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
              "vocab": vocab, "merges": merges},
}
gpt2 = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [added(0, "<|endoftext|>", special=True)],
    "normalizer": None,
    "pre_tokenizer": bytelevel(add_prefix_space=True),
    "post_processor": bytelevel(trim_offsets=False),
    "decoder": bytelevel(),
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
              "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
              "vocab": vocab, "merges": [a + " " + b for a, b in merges]},
}
json.dump(llama3, open('tiny_llama3.json', 'w', encoding='utf-8'), ensure_ascii=False)
json.dump(gpt2, open('tiny_gpt2.json', 'w', encoding='utf-8'), ensure_ascii=False)

texts = [
    "Hello world, it's 2024 and 1234567 numbers; I'M here!",
    "<|begin|>x <|begin|> y <|begin|>xy",
    "a <mask> b   <mask>\n\nc<mask>d",
    "word words sword word_ a word. (word)",
    "café cafe\u0301 CAFÉ",
    "  leading\tand\r\ntrailing  \n ",
    "你好 世界 😀 ١٢٣٤",
    "'s 'S 'll 'LL don't",
    "",
    "x",
]
with open('tiny_texts.jsonl', 'w', encoding='utf-8') as f:
    for t in texts:
        f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
