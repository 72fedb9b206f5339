// Package agent is an ordinary tool-using agent written against
// OpenAI's Go client and nothing else: it asks a chat model an
// arithmetic word problem, offers it a calculator, runs the
// calculator for every call the model makes, sends the results back,
// and returns the model's final answer. It knows nothing of agentrl;
// examples/anyagent trains the model behind its endpoint on what it
// sampled.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// MaxCalls bounds the chat calls of one Solve.
const MaxCalls = 4

// Result is what one Solve did.
type Result struct {
	// Answer is the number the model's final message gives in
	// \boxed{…}; empty when it gave none.
	Answer string
	// Calls is the number of chat completions, ToolCalls the number of
	// calculator calls the model made.
	Calls, ToolCalls int
}

// calculator is the tool the agent offers, in OpenAI's function format.
var calculator = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "calculator",
	Description: openai.String("Evaluate an integer expression with + - * and parentheses."),
	Parameters: shared.FunctionParameters{
		"type":       "object",
		"properties": map[string]any{"expression": map[string]any{"type": "string"}},
		"required":   []string{"expression"},
	},
})

var boxed = regexp.MustCompile(`\\boxed\{([^{}]*)\}`)

// Solve asks the model behind baseURL (an OpenAI-compatible /v1 base
// URL) the problem and runs the conversation to its end: at most
// MaxCalls chat completions, each of the model's calculator calls
// answered with the calculator's result (or its error, as text).
func Solve(ctx context.Context, baseURL, problem string) (Result, error) {
	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(problem)}
	var res Result
	for range MaxCalls {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "arith", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{calculator},
		})
		if err != nil {
			return res, err
		}
		res.Calls++
		if len(resp.Choices) != 1 {
			return res, fmt.Errorf("the server answered %d choices", len(resp.Choices))
		}
		msg := resp.Choices[0].Message
		msgs = append(msgs, msg.ToParam())
		if len(msg.ToolCalls) == 0 {
			if m := boxed.FindStringSubmatch(msg.Content); m != nil {
				res.Answer = m[1]
			}
			return res, nil
		}
		for _, tc := range msg.ToolCalls {
			res.ToolCalls++
			msgs = append(msgs, openai.ToolMessage(runCalculator(tc.Function.Name, tc.Function.Arguments), tc.ID))
		}
	}
	return res, nil
}

// runCalculator runs one call: the integer value of its expression, or
// the error in words.
func runCalculator(name, arguments string) string {
	if name != "calculator" {
		return fmt.Sprintf("error: no tool %q", name)
	}
	var args struct {
		Expression string `json:"expression"`
	}
	if err := json.Unmarshal([]byte(arguments), &args); err != nil {
		return "error: " + err.Error()
	}
	v, err := Eval(args.Expression)
	if err != nil {
		return "error: " + err.Error()
	}
	return strconv.FormatInt(v, 10)
}

// ErrSyntax is wrapped by Eval's error for an expression it cannot read.
var ErrSyntax = errors.New("bad expression")

// Eval evaluates an integer expression of +, -, * and parentheses
// (precedence as in Python), failing on overflow of int64.
func Eval(s string) (int64, error) {
	p := &parser{s: s}
	v, err := p.sum()
	if err == nil && p.skip() < len(p.s) {
		err = fmt.Errorf("%w: unexpected %q at %d", ErrSyntax, p.s[p.i], p.i)
	}
	return v, err
}

type parser struct {
	s string
	i int
}

func (p *parser) skip() int {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
	return p.i
}

func (p *parser) sum() (int64, error) {
	v, err := p.product()
	for err == nil && p.skip() < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
		op := p.s[p.i]
		p.i++
		var w int64
		if w, err = p.product(); err != nil {
			break
		}
		if op == '-' {
			w = -w
		}
		if (w > 0 && v > maxInt-w) || (w < 0 && v < minInt-w) {
			return 0, errors.New("integer overflow")
		}
		v += w
	}
	return v, err
}

func (p *parser) product() (int64, error) {
	v, err := p.factor()
	for err == nil && p.skip() < len(p.s) && p.s[p.i] == '*' {
		p.i++
		var w int64
		if w, err = p.factor(); err != nil {
			break
		}
		if v != 0 && (v*w/v != w || (v == -1 && w == minInt) || (w == -1 && v == minInt)) {
			return 0, errors.New("integer overflow")
		}
		v *= w
	}
	return v, err
}

const (
	maxInt = int64(^uint64(0) >> 1)
	minInt = -maxInt - 1
)

func (p *parser) factor() (int64, error) {
	switch p.skip(); {
	case p.i >= len(p.s):
		return 0, fmt.Errorf("%w: it ends early", ErrSyntax)
	case p.s[p.i] == '(':
		p.i++
		v, err := p.sum()
		if err != nil {
			return 0, err
		}
		if p.skip() >= len(p.s) || p.s[p.i] != ')' {
			return 0, fmt.Errorf("%w: missing )", ErrSyntax)
		}
		p.i++
		return v, nil
	case p.s[p.i] == '-':
		p.i++
		v, err := p.factor()
		return -v, err
	}
	j := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if j == p.i {
		return 0, fmt.Errorf("%w: unexpected %q at %d", ErrSyntax, p.s[j], j)
	}
	v, err := strconv.ParseInt(p.s[j:p.i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	return v, nil
}
