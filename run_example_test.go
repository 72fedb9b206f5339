package agentrl_test

import (
	"context"
	"fmt"
	"log"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/policy"
)

// stepPrinter is a Recorder of one's own: it prints the run's span, and
// each step's number and headline figures.
type stepPrinter struct{}

func (stepPrinter) Init(start, total int) error {
	fmt.Printf("steps %d to %d\n", start+1, total)
	return nil
}

func (stepPrinter) Record(r agentrl.StepRecord) error {
	fmt.Printf("step %d:", r.Step)
	for _, f := range r.Figures {
		fmt.Printf(" %s %.3f", f.Name, f.Value)
	}
	fmt.Printf(" (%d metrics logged)\n", len(r.Row))
	return nil
}

// rows is a MetricsSink of one's own that keeps the rows in memory
// (metrics.Logger writes them to a JSON Lines file).
type rows map[int]map[string]float64

func (r rows) Log(step int, row map[string]float64) error {
	r[step] = row
	return nil
}

// Run reports each step to a MetricsSink (TrainerParts.Metrics,
// SFTParts.Metrics) and a Recorder (RunConfig.Recorder); a
// progress.Display is the Recorder most programs pass.
func ExampleRecorder() {
	model := newTabular("abcd")
	data := []agentrl.SFTSample{{IDs: []int{0, 1, 2, 3}, Mask: []float32{0, 1, 1, 1}}}
	logged := rows{}
	tr, err := agentrl.NewSFTTrainer(agentrl.SFTConfig{
		BatchSize: 1,
		Optimizer: policy.AdamWConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
	}, agentrl.SFTParts{Policy: model, Data: data, Metrics: logged})
	if err != nil {
		log.Fatal(err)
	}
	if err := tr.Run(context.Background(), agentrl.RunConfig{Steps: 3, Recorder: stepPrinter{}}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(logged), "rows logged; train/loss of step 3:", fmt.Sprintf("%.3f", logged[3]["train/loss"]))
	// The untrained table is uniform over its 4 tokens: loss ln 4 = 1.386.

	// Output:
	// steps 1 to 3
	// step 1: loss 1.386 (14 metrics logged)
	// step 2: loss 1.240 (14 metrics logged)
	// step 3: loss 1.102 (14 metrics logged)
	// 3 rows logged; train/loss of step 3: 1.102
}
