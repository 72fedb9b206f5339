package loss_test

import (
	"fmt"

	"github.com/agentrl/agentrl/loss"
)

// Two sequences of prompt and response, with per-token values aligned
// with the whole sequences: PadRows makes the [B,T] tensor of their
// response spans that a Batch field takes, and UnpadRows takes a [B,T]
// gradient back to the sequences' positions.
func ExamplePadRows() {
	prompts := []int{2, 1}                                   // prompt lengths
	logProbs := [][]float32{{0, -9, -0.5, -1.5}, {0, -0.25}} // position 0 has none
	lp, err := loss.PadRows(logProbs, prompts, 2)            // T = the longest response
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(lp.Shape(), lp.Data())

	grads, err := loss.UnpadRows(lp, prompts, []int{4, 2}, -1) // here: −log-prob as a "gradient"
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(grads)
	// Output:
	// (2, 2) [-0.5 -1.5 -0.25 0]
	// [[0 0 0.5 1.5] [0 0.25]]
}
