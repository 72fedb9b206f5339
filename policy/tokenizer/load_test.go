package tokenizer

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTinyTokenizersMatchHF runs the two small tokenizer.json files of
// testdata/gen_tiny.py (Llama 3 split regex with ignore_merges and added
// tokens with lstrip/rstrip/single_word/normalized; GPT-2 ByteLevel with
// use_regex, add_prefix_space and "a b" merges) against the ids Hugging
// Face tokenizers 0.22 gave (testdata/hf_encode.js).
func TestTinyTokenizersMatchHF(t *testing.T) {
	for _, name := range []string{"tiny_llama3", "tiny_gpt2"} {
		t.Run(name, func(t *testing.T) {
			tok, err := FromFile(filepath.Join("testdata", name+".json"))
			require.NoError(t, err)
			f, err := os.Open(filepath.Join("testdata", name+"_cases.jsonl"))
			require.NoError(t, err)
			defer f.Close()
			sc := bufio.NewScanner(f)
			n := 0
			for sc.Scan() {
				var c struct {
					Text    string `json:"text"`
					IDs     []int  `json:"ids"`
					Decoded string `json:"decoded"`
				}
				require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
				if c.IDs == nil {
					c.IDs = []int{}
				}
				got := tok.Encode(c.Text)
				require.Equal(t, c.IDs, got, "text %q", c.Text)
				require.Equal(t, c.Decoded, tok.Decode(got), "text %q", c.Text)
				n++
			}
			require.NoError(t, sc.Err())
			require.Equal(t, 10, n)
		})
	}
}

func TestTinyAddedTokenIDs(t *testing.T) {
	tok, err := FromFile("testdata/tiny_llama3.json")
	require.NoError(t, err)
	// gen_tiny.py keeps 3256 vocabulary entries. "word" is already one of
	// them (id 1158), so Hugging Face gives the added tokens after it the
	// next free ids: <|begin|> 3256, <mask> 3257, "cafe\u0301" 3258 (TokenID
	// takes the content as written, not normalized), <|begin|>x 3259.
	for tokStr, want := range map[string]int{"<|begin|>": 3256, "<mask>": 3257, "word": 1158, "cafe\u0301": 3258, "<|begin|>x": 3259} {
		id, ok := tok.TokenID(tokStr)
		require.True(t, ok, tokStr)
		assert.Equal(t, want, id, tokStr)
	}
	assert.Equal(t, 3260, tok.VocabSize())
	assert.True(t, tok.IsSpecial(3256))
	assert.False(t, tok.IsSpecial(3258))
}

// mutate loads testdata/tiny_llama3.json as a generic JSON tree, lets edit
// change it and parses the result.
func mutate(t *testing.T, edit func(m map[string]any)) (*BPE, error) {
	t.Helper()
	data, err := os.ReadFile("testdata/tiny_llama3.json")
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	edit(m)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return Parse(out)
}

func TestParseRejectsUnsupported(t *testing.T) {
	pretok := func(m map[string]any) []any {
		return m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)
	}
	cases := []struct {
		name      string
		edit      func(m map[string]any)
		component string
	}{
		{"NFKC normalizer", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFKC"} }, "normalizer"},
		{"normalizer in sequence", func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Lowercase"}}}
		}, "normalizer.normalizers[1]"},
		{"unknown regex", func(m map[string]any) {
			pretok(m)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\w+`}
		}, "pre_tokenizer.pretokenizers[0]"},
		{"string pattern", func(m map[string]any) {
			pretok(m)[0].(map[string]any)["pattern"] = map[string]any{"String": " "}
		}, "pre_tokenizer.pretokenizers[0]"},
		{"Removed behavior", func(m map[string]any) { pretok(m)[0].(map[string]any)["behavior"] = "Removed" }, "pre_tokenizer.pretokenizers[0]"},
		{"Metaspace", func(m map[string]any) { m["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }, "pre_tokenizer"},
		{"no ByteLevel", func(m map[string]any) {
			p := m["pre_tokenizer"].(map[string]any)
			p["pretokenizers"] = pretok(m)[:1]
		}, "pre_tokenizer"},
		{"Split after ByteLevel", func(m map[string]any) {
			p := m["pre_tokenizer"].(map[string]any)
			p["pretokenizers"] = []any{pretok(m)[1], pretok(m)[0]}
		}, "pre_tokenizer.pretokenizers[1]"},
		{"WordPiece decoder", func(m map[string]any) { m["decoder"] = map[string]any{"type": "WordPiece"} }, "decoder"},
		{"no decoder", func(m map[string]any) { m["decoder"] = nil }, "decoder"},
		{"Bert post-processor", func(m map[string]any) { m["post_processor"] = map[string]any{"type": "BertProcessing"} }, "post_processor"},
		{"WordPiece model", func(m map[string]any) { m["model"].(map[string]any)["type"] = "WordPiece" }, "model"},
		{"dropout", func(m map[string]any) { m["model"].(map[string]any)["dropout"] = 0.1 }, "model.dropout"},
		{"byte_fallback", func(m map[string]any) { m["model"].(map[string]any)["byte_fallback"] = true }, "model.byte_fallback"},
		{"suffix", func(m map[string]any) { m["model"].(map[string]any)["end_of_word_suffix"] = "</w>" }, "model.end_of_word_suffix"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := mutate(t, c.edit)
			require.Error(t, err)
			require.ErrorIs(t, err, ErrUnsupported)
			var ue *UnsupportedError
			require.True(t, errors.As(err, &ue))
			assert.Equal(t, c.component, ue.Component)
		})
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	cases := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"merge token unknown", func(m map[string]any) {
			mm := m["model"].(map[string]any)
			mm["merges"] = append(mm["merges"].([]any), []any{"zzz", "q"})
		}, "model.merges[3000]"},
		{"merged token unknown", func(m map[string]any) {
			mm := m["model"].(map[string]any)
			mm["merges"] = append(mm["merges"].([]any), []any{"a", "q"})
		}, `merged token "aq" not in vocab`},
		{"merge string without space", func(m map[string]any) {
			mm := m["model"].(map[string]any)
			mm["merges"] = []any{"ab"}
		}, `merge "ab"`},
		{"merge triple", func(m map[string]any) {
			mm := m["model"].(map[string]any)
			mm["merges"] = []any{[]any{"a", "b", "c"}}
		}, "want 2 tokens"},
		{"negative id", func(m map[string]any) {
			m["model"].(map[string]any)["vocab"].(map[string]any)["a"] = -3
		}, "out of range"},
		{"empty vocab", func(m map[string]any) {
			mm := m["model"].(map[string]any)
			mm["vocab"], mm["merges"] = map[string]any{}, []any{}
		}, "vocab is empty"},
		{"no model", func(m map[string]any) { delete(m, "model") }, "no model"},
		{"empty added token", func(m map[string]any) {
			m["added_tokens"] = []any{map[string]any{"id": 5000, "content": ""}}
		}, "added_tokens[0]: empty content"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := mutate(t, c.edit)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotErrorIs(t, err, ErrUnsupported)
		})
	}
	_, err := Parse([]byte(`{"model": `))
	require.Error(t, err)
	_, err = FromFile("testdata/does-not-exist.json")
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = Load("testdata/no-such-dir")
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestMergeFormsAgree checks that "a b" and ["a", "b"] merges load the same
// model: tiny_gpt2.json differs from tiny_llama3.json in the merge form.
func TestMergeFormsAgree(t *testing.T) {
	a, err := mutate(t, func(m map[string]any) {})
	require.NoError(t, err)
	b, err := mutate(t, func(m map[string]any) {
		mm := m["model"].(map[string]any)
		var strs []any
		for _, p := range mm["merges"].([]any) {
			pair := p.([]any)
			strs = append(strs, pair[0].(string)+" "+pair[1].(string))
		}
		mm["merges"] = strs
	})
	require.NoError(t, err)
	require.Equal(t, a.model.merges, b.model.merges)
	// Spot-check by hand: Qwen3's first merge "Ġ Ġ" (rank 0) makes "ĠĠ".
	sp, _ := a.TokenID("Ġ")
	spsp, _ := a.TokenID("ĠĠ")
	v, ok := a.model.merges.get(pairKey(int32(sp), int32(sp)))
	require.True(t, ok)
	require.Equal(t, uint64(0)<<32|uint64(spsp), v)
	_, ok = a.model.merges.get(pairKey(int32(spsp), 1<<30))
	require.False(t, ok)
}

func TestLoadConfig(t *testing.T) {
	tok := qwen3(t)
	// tokenizer_config.json: eos_token "<|im_end|>" = 151645.
	assert.Equal(t, []int{151645}, tok.EOSIDs())
	assert.Contains(t, tok.ChatTemplate(), "<|im_start|>")
	assert.Equal(t, 151669, tok.VocabSize()) // 151643 entries + 26 added tokens
	id, ok := tok.TokenID("<|im_end|>")
	require.True(t, ok)
	assert.Equal(t, 151645, id)
	id, ok = tok.TokenID("Ġthe")
	require.True(t, ok)
	assert.Equal(t, 279, id) // " the" encodes to 279 in encode_cases.jsonl
	assert.True(t, tok.IsSpecial(151645))
	assert.False(t, tok.IsSpecial(151667)) // <think> is added but not special

	// A folder with generation_config.json (the small tokenizer keeps this
	// fast): eos_token first, then the generation config's other ids.
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/tiny_llama3.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644))
	cfg := filepath.Join(dir, "tokenizer_config.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"eos_token": {"content": "<mask>"}, "bos_token": "<|begin|>", "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"}]}`), 0o644))
	gen := filepath.Join(dir, "generation_config.json")
	require.NoError(t, os.WriteFile(gen, []byte(`{"eos_token_id": [3256, 3257], "pad_token_id": 0}`), 0o644))
	tok2, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, []int{3257, 3256}, tok2.EOSIDs())
	out, err := tok2.ApplyChatTemplate([]Message{{Role: "user", Content: "hi"}}, nil, ChatOptions{})
	require.NoError(t, err)
	assert.Equal(t, "<|begin|>hi<mask>", out)

	require.NoError(t, os.WriteFile(gen, []byte(`{"eos_token_id": 3257}`), 0o644))
	tok2, err = Load(dir)
	require.NoError(t, err)
	assert.Equal(t, []int{3257}, tok2.EOSIDs())

	require.NoError(t, os.WriteFile(gen, []byte(`{"eos_token_id": 999999}`), 0o644))
	_, err = Load(dir)
	require.ErrorContains(t, err, "eos_token_id[0] = 999999 names no token")

	require.NoError(t, os.WriteFile(gen, []byte(`{"eos_token_id": "x"}`), 0o644))
	_, err = Load(dir)
	require.ErrorContains(t, err, "eos_token_id")

	require.NoError(t, os.Remove(gen))
	require.NoError(t, os.WriteFile(cfg, []byte(`{"eos_token": {"content": "<nope>"}}`), 0o644))
	_, err = Load(dir)
	require.ErrorContains(t, err, `eos_token "<nope>" is not in the vocabulary`)

	require.NoError(t, os.WriteFile(cfg, []byte(`{"chat_template": [{"name": "other", "template": "x"}]}`), 0o644))
	_, err = Load(dir)
	require.ErrorContains(t, err, `no template named "default"`)

	require.NoError(t, os.WriteFile(cfg, []byte(`{"chat_template": 7}`), 0o644))
	_, err = Load(dir)
	require.ErrorContains(t, err, "chat_template")

	// Without tokenizer_config.json: no template, no EOS.
	require.NoError(t, os.Remove(cfg))
	tok3, err := Load(dir)
	require.NoError(t, err)
	assert.Empty(t, tok3.EOSIDs())
	_, err = tok3.ApplyChatTemplate([]Message{{Role: "user", Content: "x"}}, nil, ChatOptions{})
	require.ErrorIs(t, err, ErrNoChatTemplate)
}
