package reward_test

import (
	"context"
	"fmt"
	"log"

	"github.com/agentrl/agentrl/reward"
)

// Open-AgentRL's reward, routed by data source: math answers by strict
// extraction (+1 right, −1 wrong, a bare last number is no answer), code
// by the tests in the ground truth, run on the Executor (the local
// sandbox or SandboxFusion: tool.CodeInterpreter.Executor). A code
// response without a code block scores −1 without running anything, so
// the nil Executor here is never called. With ToolBonus a wrong answer
// after several assistant turns is shaped: −1 + 0.1·(turns − 1), at most
// −0.6.
func ExampleOpenAgentRL() {
	ctx := context.Background()
	rf, err := reward.OpenAgentRL(reward.OpenAgentRLConfig{ToolBonus: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, in := range []reward.Input{
		{DataSource: "math_dapo", Response: `So the answer is \boxed{42}.`, GroundTruth: "42"},
		{DataSource: "math_dapo", Response: `So the answer is \boxed{41}.`, GroundTruth: "42", Turns: 3},
		{DataSource: "aime2024", Response: "6 times 7 is 42", GroundTruth: "42"},
		{DataSource: "livecodebench", Response: "print(3)", GroundTruth: `{"inputs": ["1 2\n"], "outputs": ["3\n"]}`},
	} {
		out, err := rf(ctx, in)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-13s score %+.1f acc %v\n", in.DataSource, out.Score, out.Acc)
	}
	// Output:
	// math_dapo     score +1.0 acc true
	// math_dapo     score -0.8 acc false
	// aime2024      score -1.0 acc false
	// livecodebench score -1.0 acc false
}
