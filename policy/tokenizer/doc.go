// Package tokenizer implements byte-level BPE tokenizers read from Hugging
// Face tokenizer.json files (Qwen2/Qwen3, Llama 3, GPT-2 style), a plain
// byte-level tokenizer for tiny models, and chat templates rendered exactly
// as transformers' apply_chat_template renders them.
//
// # Tokenizers
//
// Load reads a checkpoint folder (tokenizer.json, tokenizer_config.json,
// generation_config.json) and FromFile or Parse a tokenizer.json alone. The
// result, *BPE, encodes to the ids Hugging Face tokenizers gives for
// encode(text, add_special_tokens=False): added tokens are matched verbatim
// first (with their special, lstrip, rstrip, single_word and normalized
// flags), then the NFC normalizer, the pre-tokenizers (Split with the Qwen2,
// Llama 3 or GPT-2 regex, ByteLevel) and the BPE merges run. Go's regexp
// cannot express these regexes (they need look-ahead), so a hand-written
// scanner runs them; a fuzz test holds it to a backtracking regex engine.
// Anything else in a tokenizer.json gives an *UnsupportedError naming the
// component, never a silently different tokenization.
//
// Bytes is the tokenizer of tiny models: the 256 byte values plus named
// special tokens. Both implement the Tokenizer interface.
//
// # Decoding
//
// Decode follows Hugging Face: unknown ids are skipped and byte sequences
// that are not valid UTF-8 become U+FFFD by the maximal-subpart rule of
// Rust's String::from_utf8_lossy. DecodeChecked reports unknown ids as an
// *IDError instead. StreamDecoder decodes a token stream as it is sampled,
// holding back a character split across tokens.
//
// # Chat templates
//
// ApplyChatTemplate (and NewChatTemplate for any template) renders Jinja
// chat templates with gonja, set up as transformers sets up jinja2:
// trim_blocks, lstrip_blocks, a tojson that keeps key order, writes ", " and
// ": " and leaves non-ASCII alone, ordered dict items(), and
// raise_exception. Tool schemas and tool-call arguments are taken as
// json.RawMessage and keep their key order through rendering.
//
// tokenizer depends on nothing else in agentrl.
package tokenizer
