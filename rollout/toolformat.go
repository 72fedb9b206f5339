package rollout

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrUnknownToolFormat is wrapped by the errors of ToolFormatByName and
// ToolFormatFromTemplate when no format fits.
var ErrUnknownToolFormat = errors.New("rollout: unknown tool-call format")

// Names of the tool-call formats, as vLLM's --tool-call-parser names
// them.
const (
	FormatHermes     = "hermes"      // Qwen2.5, Qwen3 and Hermes models: <tool_call> JSON
	FormatQwen3Coder = "qwen3_coder" // Qwen3-Coder: <tool_call><function=…><parameter=…>
	FormatLlama3JSON = "llama3_json" // Llama 3.1-3.3: bare JSON calls, ipython results
	FormatHarmony    = "openai"      // gpt-oss: harmony messages with a recipient
)

// ToolFormat is a model family's tool-call format: the Parser of its
// calls and the ResultFormat of the results it reads back, for
// Config.Parser and Config.Format.
type ToolFormat struct {
	// Name is the format's name (FormatHermes, …).
	Name   string
	Parser Parser
	Format ResultFormat
}

// ToolFormatByName returns the format vLLM's --tool-call-parser calls
// name: "hermes", "qwen3_coder", "llama3_json" or "openai", with the
// result rendering of the family's own chat template.
func ToolFormatByName(name string) (ToolFormat, error) {
	switch name {
	case FormatHermes:
		return ToolFormat{Name: name, Parser: Hermes{}, Format: ChatML{}}, nil
	case FormatQwen3Coder:
		return ToolFormat{Name: name, Parser: Qwen3Coder{}, Format: Qwen3CoderResults{}}, nil
	case FormatLlama3JSON:
		return ToolFormat{Name: name, Parser: Llama3JSON{}, Format: Llama3Results{}}, nil
	case FormatHarmony:
		return ToolFormat{Name: name, Parser: Harmony{}, Format: HarmonyResults{}}, nil
	}
	return ToolFormat{}, fmt.Errorf("%w %q (known: %s, %s, %s, %s)", ErrUnknownToolFormat, name,
		FormatHermes, FormatQwen3Coder, FormatLlama3JSON, FormatHarmony)
}

var (
	// A Jinja string literal that ends a tool response with a newline, as
	// Qwen3-Coder's template writes '\n</tool_response>\n'.
	responseThenNewline = regexp.MustCompile(`</tool_response>\\n['"]`)
	// A filter that JSON-encodes a message's content.
	contentToJSON = regexp.MustCompile(`content\s*\|\s*tojson`)
)

// ToolFormatFromTemplate picks the tool-call format a chat template (the
// chat_template of a model's tokenizer_config.json, as
// policy/tokenizer's BPE.ChatTemplate returns it) renders, by the markers
// in its text, in this order:
//
//   - <|channel|> and <|message|>: harmony ("openai"), with results as
//     JSON strings when the template applies tojson to message content
//     without testing for strings first, as gpt-oss's published template
//     does;
//   - <function= and <parameter=: Qwen3-Coder's XML calls
//     ("qwen3_coder"), with Qwen3-Coder's result layout when the template
//     ends a tool response with a newline, else ChatML's (Qwen3.5's
//     templates), whose generation prompt opens a <think> block when the
//     template's does;
//   - <tool_call>: Hermes JSON calls ("hermes") with ChatML results;
//   - <|start_header_id|> with ipython or <|python_tag|>: Llama 3's JSON
//     calls ("llama3_json"), results wrapped as {"output": …} when the
//     template writes them so (vLLM's example template).
//
// A template with none of them gives an error wrapping
// ErrUnknownToolFormat; ToolFormatByName names a format explicitly.
func ToolFormatFromTemplate(chatTemplate string) (ToolFormat, error) {
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(chatTemplate, x) {
				return false
			}
		}
		return true
	}
	switch {
	case has(harmonyChannel, harmonyMessage):
		quote := contentToJSON.MatchString(chatTemplate) && !has("content is string")
		return ToolFormat{Name: FormatHarmony, Parser: Harmony{}, Format: HarmonyResults{QuoteResults: quote}}, nil
	case has(q3cFuncOpen, q3cParamOpen):
		if responseThenNewline.MatchString(chatTemplate) {
			return ToolFormat{Name: FormatQwen3Coder, Parser: Qwen3Coder{}, Format: Qwen3CoderResults{}}, nil
		}
		return ToolFormat{Name: FormatQwen3Coder, Parser: Qwen3Coder{}, Format: ChatML{GenerationPrompt: chatMLGenerationPrompt(chatTemplate)}}, nil
	case has(q3cCallOpen):
		return ToolFormat{Name: FormatHermes, Parser: Hermes{}, Format: ChatML{GenerationPrompt: chatMLGenerationPrompt(chatTemplate)}}, nil
	case has("<|start_header_id|>") && (has("ipython") || has(llamaPythonTag)):
		return ToolFormat{Name: FormatLlama3JSON, Parser: Llama3JSON{}, Format: Llama3Results{OutputObject: has(`"output"`)}}, nil
	}
	return ToolFormat{}, fmt.Errorf("%w: the chat template shows none of the known tool-call markers", ErrUnknownToolFormat)
}

// chatMLGenerationPrompt returns the generation prompt of a ChatML
// template: "<|im_start|>assistant\n<think>\n" when the template's
// add_generation_prompt block writes an open <think> line (Qwen3.5), else
// "" (ChatML's default, "<|im_start|>assistant\n").
func chatMLGenerationPrompt(chatTemplate string) string {
	i := strings.LastIndex(chatTemplate, "add_generation_prompt")
	if i < 0 {
		return ""
	}
	block := chatTemplate[i:]
	if strings.Contains(block, `'<think>\n'`) || strings.Contains(block, `"<think>\n"`) {
		return "<|im_start|>assistant\n<think>\n"
	}
	return ""
}
