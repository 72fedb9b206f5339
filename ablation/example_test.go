package ablation_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/ablation"
)

// A grid of two variants × three seeds. A real Run builds the policy,
// engine, reward and agentrl.Trainer from the variant's configuration
// (with TrainerParts.Losses = v.Losses), trains and evaluates, all seeded
// by seed; this one stands in for that with a number made from the
// configuration and the seed.
func ExampleGrid() {
	base := agentrl.GRPOTCR()
	grid := ablation.Grid{
		Variants: []ablation.Variant{
			{Name: "grpo-tcr", Description: "clip 0.2/0.28"},
			{Name: "clip-sym", Description: "clip 0.2/0.2", Edit: func(c *agentrl.TrainerConfig) { c.Loss.ClipHigh = 0.2 }},
		},
		Seeds:    []uint64{1, 2, 3},
		Parallel: 1, // local training keeps every core busy
		Run: func(ctx context.Context, v ablation.Variant, seed uint64) (ablation.Result, error) {
			cfg, err := v.Apply(base)
			if err != nil {
				return ablation.Result{}, err
			}
			cfg.Seed = seed
			acc := 0.4 + cfg.Loss.ClipHigh + 0.01*float64(seed)
			return ablation.Result{Final: map[string]float64{"avg@8": acc}}, nil
		},
	}
	results, err := grid.Execute(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	rows, err := ablation.Summarize(results, "avg@8")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := ablation.WriteTable(os.Stdout, rows, "avg@8"); err != nil {
		fmt.Println(err)
	}
	// Output:
	// variant   avg@8: mean ± 95% CI  [lo, hi]          (n)
	// grpo-tcr  0.7000 ± 0.0248       [0.6752, 0.7248]  (3)
	// clip-sym  0.6200 ± 0.0248       [0.5952, 0.6448]  (3)
}
