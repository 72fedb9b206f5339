package rollout

import "strings"

// Llama3Results renders tool results as Llama 3.1's chat template renders
// tool messages (role "tool" or "ipython") after an assistant turn with a
// JSON tool call: the turn is closed with <|eot_id|> (nothing is added
// when it already ends with <|eot_id|> or <|eom_id|>), each result is an
// ipython message whose content is the result as a JSON string (the
// template applies tojson to any iterable content, strings included), and
// the header of the next assistant turn follows:
//
//	<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n"R1"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n
//
// Llama 3.2 and 3.3's templates render tool messages the same way.
// Llama 3.1's template allows one call per assistant message; a turn with
// several calls gets one ipython message per result, in call order.
type Llama3Results struct {
	// OutputObject renders each result as {"output": "R"}, as vLLM's
	// examples/tool_chat_template_llama3.1_json.jinja does, instead of
	// the bare JSON string of Meta's template.
	OutputObject bool
}

// Render implements ResultFormat.
func (f Llama3Results) Render(turnText string, results []string) string {
	var b strings.Builder
	if !strings.HasSuffix(turnText, llamaEOT) && !strings.HasSuffix(turnText, llamaEOM) {
		b.WriteString(llamaEOT)
	}
	for _, r := range results {
		b.WriteString("<|start_header_id|>ipython<|end_header_id|>\n\n")
		if f.OutputObject {
			b.WriteString(`{"output": `)
		}
		pyJSONString(&b, r)
		if f.OutputObject {
			b.WriteString("}")
		}
		b.WriteString(llamaEOT)
	}
	b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	return b.String()
}
