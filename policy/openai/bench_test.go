package openai

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentrl/agentrl/lm"
)

// BenchmarkDecodeCompletion decodes a vLLM response of 4096 tokens with
// log-probs (about 170 KB of JSON), the per-turn cost on the client.
func BenchmarkDecodeCompletion(b *testing.B) {
	const n = 4096
	toks, lps, top := make([]string, n), make([]string, n), make([]string, n)
	for i := range n {
		toks[i] = fmt.Sprintf(`"token_id:%d"`, 100000+i)
		lps[i] = fmt.Sprintf("%.6f", -float64(i%97)/13)
		top[i] = fmt.Sprintf(`{"token_id:%d":%s}`, 100000+i, lps[i])
	}
	body := []byte(`{"choices":[{"index":0,"text":"` + strings.Repeat("x", n) + `","logprobs":{"text_offset":[],"token_logprobs":[` +
		strings.Join(lps, ",") + `],"tokens":[` + strings.Join(toks, ",") + `],"top_logprobs":[` + strings.Join(top, ",") +
		`]},"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":10}}`)
	p := lm.SampleParams{Logprobs: true, Temperature: 1}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		g, err := decodeCompletion(body, p, RawLogprobs)
		if err != nil || len(g.Tokens) != n {
			b.Fatal(err)
		}
	}
}
