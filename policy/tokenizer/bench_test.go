package tokenizer

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentrl/agentrl/internal/cputime"
)

// BenchmarkEncodeCorpus encodes every text of testdata/encode_cases.jsonl
// (about 150 KB of code, prose and markup) one after another on one core;
// testdata/hf_bench.js times the same texts through Hugging Face tokenizers.
func BenchmarkEncodeCorpus(b *testing.B) {
	tok := qwen3(b)
	cases := readEncodeCases(b)
	total := 0
	for _, c := range cases {
		total += len(c.Text)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range cases {
			tok.Encode(c.Text)
		}
	}
}

// BenchmarkEncodeCorpusNoCache is BenchmarkEncodeCorpus with the word
// cache disabled: the cost of the merges themselves.
func BenchmarkEncodeCorpusNoCache(b *testing.B) {
	base := qwen3(b)
	tok := &BPE{model: base.model, raw: base.raw, normed: base.normed, nfc: base.nfc, steps: base.steps}
	tok.model.cache = nil
	cases := readEncodeCases(b)
	total := 0
	for _, c := range cases {
		total += len(c.Text)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range cases {
			tok.Encode(c.Text)
		}
	}
}

// BenchmarkEncodeBatchCorpus encodes the corpus with EncodeBatch (all cores).
func BenchmarkEncodeBatchCorpus(b *testing.B) {
	tok := qwen3(b)
	cases := readEncodeCases(b)
	texts := make([]string, len(cases))
	total := 0
	for i, c := range cases {
		texts[i] = c.Text
		total += len(c.Text)
	}
	b.SetBytes(int64(total))
	for b.Loop() {
		tok.EncodeBatch(texts)
	}
}

// BenchmarkDecodeCorpus decodes the corpus's ids.
func BenchmarkDecodeCorpus(b *testing.B) {
	tok := qwen3(b)
	cases := readEncodeCases(b)
	total := 0
	for _, c := range cases {
		total += len(c.Text)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range cases {
			tok.Decode(c.IDs)
		}
	}
}

// BenchmarkVsHFTokenizers times Encode over the corpus next to Hugging Face
// tokenizers in the same run: it runs testdata/hf_bench.js with node (set
// AGENTRL_HF_NODE_MODULES to a node_modules folder holding
// @anush008/tokenizers; skipped otherwise) and reports HF's time per pass
// (encodeBatch on one Rayon thread, one N-API call per pass) and the ratios
// hf/go of wall time and of CPU time (user + system of all threads of each
// process, which stays meaningful on a busy machine).
func BenchmarkVsHFTokenizers(b *testing.B) {
	mods := os.Getenv("AGENTRL_HF_NODE_MODULES")
	if mods == "" {
		b.Skip("set AGENTRL_HF_NODE_MODULES to a node_modules folder with @anush008/tokenizers")
	}
	cmd := exec.Command("node", "hf_bench.js", "../qwen3/tokenizer.json", "encode_cases.jsonl")
	cmd.Dir = "testdata"
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods, "RAYON_NUM_THREADS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("node hf_bench.js: %v\n%s", err, out)
	}
	var hf map[string]float64
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			if err := json.Unmarshal([]byte(rest), &hf); err != nil {
				b.Fatal(err)
			}
		}
	}
	hfNs, hfCPU := hf["encodeBatch"], hf["encodeBatch_cpu"]
	if hfNs == 0 || hfCPU == 0 {
		b.Fatalf("no RESULT line in:\n%s", out)
	}
	tok := qwen3(b)
	cases := readEncodeCases(b)
	total := 0
	for _, c := range cases {
		total += len(c.Text)
	}
	b.SetBytes(int64(total))
	cpu0 := int64(cputime.Self())
	for b.Loop() {
		for _, c := range cases {
			tok.Encode(c.Text)
		}
	}
	goCPU := float64(int64(cputime.Self())-cpu0) / float64(b.N)
	goNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(hfNs, "hf-ns/pass")
	b.ReportMetric(goCPU, "go-cpu-ns/pass")
	b.ReportMetric(hfCPU, "hf-cpu-ns/pass")
	b.ReportMetric(hfNs/goNs, "hf/go-wall")
	b.ReportMetric(hfCPU/goCPU, "hf/go-cpu")
}

// BenchmarkLoad reads and parses the Qwen3 checkpoint files (11 MB of JSON).
func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := Load("qwen3"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyChatTemplate renders the fixture's two-tool-call
// conversation with the Qwen3 template.
func BenchmarkApplyChatTemplate(b *testing.B) {
	tok := qwen3(b)
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "code_interpreter", "description": "A tool for executing code.", "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "The code to execute."}}, "required": ["code"]}}}`)}
	msgs := []Message{
		{Role: "system", Content: "sys"},
		{Role: "user", Content: "Half of 7!?"},
		{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "code_interpreter", Arguments: json.RawMessage(`{"code": "import math\nprint(math.factorial(7))"}`)}}}},
		{Role: "tool", Content: "5040"},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tok.ApplyChatTemplate(msgs, tools, ChatOptions{AddGenerationPrompt: true}); err != nil {
			b.Fatal(err)
		}
	}
}
