package progress_test

import (
	"fmt"
	"os"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/progress"
)

// A Display follows a run: RunConfig{Recorder: d} makes either trainer's
// Run call Init and Record; here a program calls them itself.
func ExampleDisplay() {
	// A fixed clock makes the output reproducible; a real run leaves Clock nil.
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	d := progress.New(progress.Config{
		Description: "grpo",
		Out:         os.Stdout,      // nil means stderr
		Mode:        progress.Lines, // progress.Auto draws a bar on a terminal
		Clock:       func() time.Time { return now },
	})
	if err := d.Init(0, 3); err != nil { // steps 1 to 3
		fmt.Println(err)
		return
	}
	for step := 1; step <= 3; step++ {
		now = now.Add(4 * time.Second)
		_ = d.Record(agentrl.StepRecord{Step: step, Tokens: 2000, Figures: []agentrl.Figure{
			{Name: "reward", Value: 0.2 * float64(step)}, {Name: "acc", Value: 0.1 * float64(step)},
		}})
	}
	// Output:
	// [grpo] step 1/3 (33%) reward 0.200 acc 0.100 500 tok/s elapsed 4s eta 8s
	// [grpo] step 3/3 (100%) reward 0.600 acc 0.300 500 tok/s elapsed 12s eta 0s
}
