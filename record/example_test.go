package record_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/record"
	"github.com/agentrl/agentrl/reward"
)

// An agent written against OpenAI's Go client talks to a Recorder for
// two turns, its session named by its base URL; the session becomes
// one trajectory of the tokens the model sampled, the second user turn
// masked out. (The model here is a scripted sampler over a byte
// tokenizer with a ChatML template; a *policy.Model or a *fleet.Fleet
// takes its place in a program.)
func Example() {
	tok, err := tokenizer.NewBytes(tokenizer.BytesConfig{
		Specials: []string{"<|im_start|>", "<|im_end|>"}, EOS: []string{"<|im_end|>"},
		ChatTemplate: "{%- for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}" +
			"{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}",
	})
	if err != nil {
		panic(err)
	}
	model := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: tok.EOSIDs()})
	model.HandleDefault(policytest.Response{Text: "Hi!<|im_end|>"}, policytest.Response{Text: "Bye.<|im_end|>"})
	rec, err := record.New(record.Config{Sampler: model, Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(rec)
	defer srv.Close()

	// The agent: any program with an OpenAI base URL.
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/sessions/ep-1/v1"), option.WithAPIKey("unused"))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello.")}
	for _, next := range []string{"Goodbye.", ""} { // two turns
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "any", Messages: msgs})
		if err != nil {
			panic(err)
		}
		fmt.Println("model:", resp.Choices[0].Message.Content)
		if next != "" {
			msgs = append(msgs, resp.Choices[0].Message.ToParam(), openai.UserMessage(next))
		}
	}
	if err := rec.SetReward("ep-1", reward.Output{Score: 1}); err != nil {
		panic(err)
	}

	s, _ := rec.Take("ep-1")
	trajs, err := rec.Trajectories(s, record.Split)
	if err != nil {
		panic(err)
	}
	t := trajs[0]
	fmt.Printf("%d trajectory, %d calls, reward %g\n", len(trajs), len(t.Turns), s.Reward.Score)
	for _, turn := range t.Turns {
		fmt.Printf("sampled %q (mask %v)\n", tok.Decode(t.Tokens[turn.Start:turn.End]), t.Mask[turn.Start])
	}
	fmt.Printf("between them %q (mask %v)\n", tok.Decode(t.Tokens[t.Turns[0].End:t.Turns[1].Start]), t.Mask[t.Turns[0].End])
	// Output:
	// model: Hi!
	// model: Bye.
	// 1 trajectory, 2 calls, reward 1
	// sampled "Hi!<|im_end|>" (mask 1)
	// sampled "Bye.<|im_end|>" (mask 1)
	// between them "\n<|im_start|>user\nGoodbye.<|im_end|>\n<|im_start|>assistant\n" (mask 0)
}
