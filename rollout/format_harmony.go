package rollout

import "strings"

// HarmonyResults renders tool results in OpenAI's harmony format, as
// gpt-oss reads them: after a turn that ended with <|call|>, each result
// is a message from the tool to the assistant on the commentary channel,
// and the next assistant message is opened:
//
//	<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>R1<|end|><|start|>assistant
//
// The author of each result is the recipient of the call it answers, read
// back from the turn (Harmony's parse), in call order. The content is the
// result as written, as openai-harmony renders a tool message
// (docs/format.md) and vLLM's gpt-oss serving sends it; QuoteResults
// renders it as a JSON string instead, as the chat template in gpt-oss's
// tokenizer_config.json does (message.content|tojson).
type HarmonyResults struct {
	// QuoteResults renders each result as a JSON string.
	QuoteResults bool
}

// Render implements ResultFormat.
func (f HarmonyResults) Render(turnText string, results []string) string {
	_, recipients := harmonyCalls(turnText)
	var b strings.Builder
	for i, r := range results {
		author := "functions"
		if i < len(recipients) && recipients[i] != "" {
			author = recipients[i]
		}
		b.WriteString(harmonyStart + author + " to=assistant" + harmonyChannel + "commentary" + harmonyMessage)
		if f.QuoteResults {
			pyJSONString(&b, r)
		} else {
			b.WriteString(r)
		}
		b.WriteString(harmonyEnd)
	}
	b.WriteString(harmonyStart + "assistant")
	return b.String()
}
