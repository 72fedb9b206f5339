package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hfBytesConfig is a byte tokenizer like examples/arith's: chat markup
// whose specials overlap ("<|im_start|>" and "<|im_start|>user\n"), tool
// markup, two EOS specials and a ChatML template.
var hfBytesConfig = BytesConfig{
	Specials: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im_start|>user\n", "<|im_start|>assistant\n",
		"<tool_call>", "</tool_call>", `{"name": "f", "arguments": {"x": "`, `"}}`, `\boxed{`},
	EOS:          []string{"<|im_end|>", "<|endoftext|>"},
	ChatTemplate: "{%- for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}",
}

// hfBytesTexts are texts that exercise the specials: overlapping ones,
// one split by another, broken ones, bytes that are not UTF-8.
var hfBytesTexts = []string{
	"",
	"plain ASCII text 123",
	"<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
	"<|im_start|>system\nhi<|im_end|>",
	`<tool_call>{"name": "f", "arguments": {"x": "print(2+2)"}}</tool_call>`,
	`\boxed{4}<|im_end|><|endoftext|>`,
	"<|im_start|><|im_start|>user\n<|im_start|>user",
	"<|im_end", "<|im_start|>use", "<tool_call</tool_call>>",
	"héllo wörld — ünïcödé ✓ 日本語 🙂",
	"\x00\x01\xff\xfe bytes \xc3 not UTF-8 \xe2\x82",
	" leading and trailing spaces \n\t ",
}

func writeHFBytes(t testing.TB, opts HFOptions) (*Bytes, *BPE, string) {
	t.Helper()
	b, err := NewBytes(hfBytesConfig)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, b.WriteHF(dir, opts))
	bpe, err := Load(dir)
	require.NoError(t, err)
	return b, bpe, dir
}

// TestBytesWriteHF: the files WriteHF writes load as a BPE that encodes,
// decodes, names its tokens, ends generation and renders chats exactly
// as the Bytes tokenizer does; Control decides which specials are
// special.
func TestBytesWriteHF(t *testing.T) {
	b, bpe, dir := writeHFBytes(t, HFOptions{Control: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im_start|>user\n", "<|im_start|>assistant\n"}})
	assert.Equal(t, b.VocabSize(), bpe.VocabSize())
	assert.Equal(t, []int{258, 256}, b.EOSIDs())
	assert.Equal(t, []int{258}, bpe.EOSIDs(), "<|im_end|>, tokenizer_config.json's eos_token; the second is the model's to list")
	assert.NoFileExists(t, filepath.Join(dir, "generation_config.json"))
	r := rand.New(rand.NewPCG(1, 2))
	texts := append([]string(nil), hfBytesTexts...)
	for range 200 {
		// Random texts over bytes and pieces of the specials.
		var sb strings.Builder
		for range r.IntN(40) {
			if r.IntN(4) == 0 {
				s := hfBytesConfig.Specials[r.IntN(len(hfBytesConfig.Specials))]
				sb.WriteString(s[:1+r.IntN(len(s))])
			} else {
				sb.WriteByte(byte(r.IntN(256)))
			}
		}
		texts = append(texts, sb.String())
	}
	for _, text := range texts {
		ids := b.Encode(text)
		assert.Equal(t, ids, bpe.Encode(text), "%q", text)
		assert.Equal(t, b.Decode(ids), bpe.Decode(ids), "%q", text)
	}
	for range 100 {
		ids := make([]int, r.IntN(20))
		for i := range ids {
			ids[i] = r.IntN(b.VocabSize())
		}
		assert.Equal(t, b.Decode(ids), bpe.Decode(ids), "%v", ids)
	}
	for i, s := range hfBytesConfig.Specials {
		id, ok := bpe.TokenID(s)
		assert.True(t, ok, s)
		assert.Equal(t, 256+i, id, s)
		assert.Equal(t, i < 5, bpe.IsSpecial(id), "%q: control tokens only are special", s)
	}
	msgs := []Message{{Role: "user", Content: "What is 2+2?"}, {Role: "assistant", Content: `\boxed{4}`}, {Role: "user", Content: "And 3+3?"}}
	want, err := b.ApplyChatTemplate(msgs, nil, ChatOptions{AddGenerationPrompt: true})
	require.NoError(t, err)
	got, err := bpe.ApplyChatTemplate(msgs, nil, ChatOptions{AddGenerationPrompt: true})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n\\boxed{4}<|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n", got)

	// The files themselves: unescaped markup, no merges.
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	require.NoError(t, err)
	assert.Contains(t, string(cfg), `"eos_token": "<|im_end|>"`)
	assert.Contains(t, string(cfg), `"tokenizer_class": "PreTrainedTokenizerFast"`)
	var tj struct {
		Model struct {
			Vocab  map[string]int `json:"vocab"`
			Merges []any          `json:"merges"`
		} `json:"model"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &tj))
	assert.Len(t, tj.Model.Vocab, 256)
	assert.Empty(t, tj.Model.Merges)
	assert.Equal(t, int('A'), tj.Model.Vocab["A"])
	assert.Equal(t, int(' '), tj.Model.Vocab["Ġ"], "GPT-2's rune for the space")
}

// TestBytesWriteHFDefaults: without Control every special is special;
// no template, no chat_template; a Control that is not a special is an
// error.
func TestBytesWriteHFDefaults(t *testing.T) {
	_, bpe, _ := writeHFBytes(t, HFOptions{})
	for i := range hfBytesConfig.Specials {
		assert.True(t, bpe.IsSpecial(256+i))
	}

	one, err := NewBytes(BytesConfig{Specials: []string{"<eos>"}, EOS: []string{"<eos>"}})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, one.WriteHF(dir, HFOptions{}))
	loaded, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, []int{256}, loaded.EOSIDs())
	assert.Empty(t, loaded.ChatTemplate())

	assert.EqualError(t, one.WriteHF(dir, HFOptions{Control: []string{"<bos>"}}), `tokenizer: WriteHF: HFOptions.Control "<bos>" is not a special of this tokenizer`)
	assert.ErrorContains(t, one.WriteHF(filepath.Join(dir, "absent"), HFOptions{}), "no such file or directory")
}

// TestBytesWriteHFMatchesHFTokenizers loads the written tokenizer.json in
// Hugging Face tokenizers (Rust, through node; set
// AGENTRL_HF_NODE_MODULES to a node_modules folder holding
// @anush008/tokenizers, skipped otherwise) and compares its ids and
// decoding with the Bytes tokenizer's.
func TestBytesWriteHFMatchesHFTokenizers(t *testing.T) {
	mods := os.Getenv("AGENTRL_HF_NODE_MODULES")
	if mods == "" {
		t.Skip("set AGENTRL_HF_NODE_MODULES to a node_modules folder with @anush008/tokenizers")
	}
	b, _, dir := writeHFBytes(t, HFOptions{Control: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}})
	var in bytes.Buffer
	for _, text := range hfBytesTexts {
		if !utf8.ValidString(text) {
			continue // JSON carries UTF-8 only
		}
		line, err := json.Marshal(map[string]string{"text": text})
		require.NoError(t, err)
		in.Write(append(line, '\n'))
	}
	texts := filepath.Join(dir, "texts.jsonl")
	require.NoError(t, os.WriteFile(texts, in.Bytes(), 0o644))
	script, err := filepath.Abs("testdata/hf_encode.js")
	require.NoError(t, err)
	cmd := exec.Command("node", script, filepath.Join(dir, "tokenizer.json"), texts)
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	out, err := cmd.Output()
	require.NoError(t, err)
	sc := bufio.NewScanner(bytes.NewReader(out))
	n := 0
	for sc.Scan() {
		var c struct {
			Text    string `json:"text"`
			IDs     []int  `json:"ids"`
			Decoded string `json:"decoded"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		want := b.Encode(c.Text)
		if len(want) == 0 {
			want = []int{}
		}
		assert.Equal(t, want, c.IDs, "%q", c.Text)
		assert.Equal(t, c.Text, c.Decoded, "%q", c.Text)
		n++
	}
	assert.Greater(t, n, 10)
}

// FuzzBytesWriteHF: for any text, the tokenizer WriteHF describes
// encodes as the Bytes tokenizer does, and decodes back to what it does.
func FuzzBytesWriteHF(f *testing.F) {
	for _, s := range hfBytesTexts {
		f.Add(s)
	}
	b, err := NewBytes(hfBytesConfig)
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	if err := b.WriteHF(dir, HFOptions{}); err != nil {
		f.Fatal(err)
	}
	bpe, err := Load(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		ids := b.Encode(text)
		got := bpe.Encode(text)
		if len(ids) != len(got) {
			t.Fatalf("%q: Bytes %v, BPE %v", text, ids, got)
		}
		for i := range ids {
			if ids[i] != got[i] {
				t.Fatalf("%q: Bytes %v, BPE %v", text, ids, got)
			}
		}
		if b.Decode(ids) != bpe.Decode(ids) {
			t.Fatalf("%q: Bytes decodes %q, BPE %q", text, b.Decode(ids), bpe.Decode(ids))
		}
	})
}
