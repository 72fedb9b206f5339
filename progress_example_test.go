package agentrl_test

import (
	"fmt"
	"os"
	"time"

	"github.com/agentrl/agentrl"
)

func ExampleNewProgress() {
	// A fixed clock makes the output reproducible; a real run leaves Clock nil.
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := agentrl.NewProgress(agentrl.ProgressConfig{
		Total: 3, Description: "grpo",
		Out:   os.Stdout,             // nil means stderr
		Mode:  agentrl.ProgressLines, // ProgressAuto draws a bar on a terminal
		Clock: func() time.Time { return now },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for step := 1; step <= 3; step++ {
		now = now.Add(4 * time.Second)
		_ = p.Update(agentrl.ProgressStats{Step: step, Tokens: 2000, Values: []agentrl.ProgressValue{
			{Name: "reward", Value: 0.2 * float64(step)}, {Name: "acc", Value: 0.1 * float64(step)},
		}})
	}
	_ = p.Finish()
	// Output:
	// [grpo] step 1/3 (33%) reward 0.200 acc 0.100 500 tok/s elapsed 4s eta 8s
	// [grpo] step 3/3 (100%) reward 0.600 acc 0.300 500 tok/s elapsed 12s eta 0s
}
