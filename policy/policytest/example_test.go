package policytest_test

import (
	"context"
	"fmt"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/policytest"
)

func ExampleSampler() {
	s := policytest.New(policytest.Config{Encode: encode, Decode: decode})
	// Every conversation starting with "Q:" answers in two turns.
	s.HandleText("Q:", policytest.Text("call()</call> ignored"), policytest.Text("done"))

	ctx := context.Background()
	params := lm.SampleParams{Stop: []string{"</call>"}, Logprobs: true}
	prompt := encode("Q: 2+2?")
	g, _ := s.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: params, Session: "s1"}})
	fmt.Printf("%q %s %v\n", decode(g[0].Tokens), g[0].FinishReason, g[0].LogProbs[:2])

	prompt = append(append(prompt, g[0].Tokens...), encode(" => 4. ")...)
	g, _ = s.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: params, Session: "s1"}})
	fmt.Printf("%q %s\n", decode(g[0].Tokens), g[0].FinishReason)
	fmt.Println(len(s.Requests()), "requests")
	// Output:
	// "call()</call>" stop [-0.099 -0.097]
	// "done" length
	// 2 requests
}
