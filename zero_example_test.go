package agentrl_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"sync"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/policy"
)

// Sharded training state: with DataParallel.ZeRO each rank keeps its
// shard of the AdamW moments (ZeRO-1) and of the gradients (ZeRO-2)
// instead of the whole, and the ranks still end every step with the same
// whole model. Here two ranks run as goroutines (dist.NewGroup; in a
// program, processes under a launcher with dist.Open) and fine-tune a
// small random Qwen3 with SFT; the step's metrics say what the rank that
// holds the most keeps of each kind.
func ExampleDataParallel_zeRO() {
	ctx := context.Background()
	comms, err := dist.NewGroup(ctx, 2, dist.GroupOptions{})
	if err != nil {
		log.Fatal(err)
	}
	data := []agentrl.SFTSample{
		{IDs: []int{0, 1, 2, 3}, Mask: []float32{0, 1, 1, 1}},
		{IDs: []int{3, 2, 1}, Mask: []float32{0, 1, 1}},
	}
	weights := make([][]float32, 2)
	var last agentrl.SFTMetrics
	var wg sync.WaitGroup
	for r, comm := range comms {
		wg.Go(func() {
			defer comm.Close()
			m, err := policy.New(policy.Config{
				ModelType: policy.ModelQwen3, VocabSize: 8, HiddenSize: 16, IntermediateSize: 32,
				NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
				MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
			}, 1)
			if err != nil {
				log.Fatal(err)
			}
			defer m.Close()
			tr, err := agentrl.NewSFTTrainer(agentrl.SFTConfig{BatchSize: 2, Epochs: 3, Optimizer: policy.AdamWConfig{LR: 0.01}},
				agentrl.SFTParts{Policy: m, Data: data, DataParallel: agentrl.DataParallel{Comm: comm, ZeRO: agentrl.ShardGradients}})
			if err != nil {
				log.Fatal(err)
			}
			if err := tr.Train(ctx, func(s agentrl.SFTMetrics) error {
				if r == 0 {
					last = s
				}
				return nil
			}); err != nil {
				log.Fatal(err)
			}
			for _, p := range m.Params() {
				weights[r] = append(weights[r], p.Data...)
			}
		})
	}
	wg.Wait()
	n := len(weights[0])
	fmt.Printf("%d weights, the same on both ranks: %v\n", n, slices.Equal(weights[0], weights[1]))
	fmt.Printf("per rank: weights %d B, gradients %d B, AdamW moments %d B\n", last.Memory.Weights, last.Memory.Gradients, last.Memory.Optimizer)
	// One process holds 4 B of gradient and 8 B of moments per weight
	// (19,392 B and 38,784 B); each of two ranks half of that.

	// Output:
	// 4848 weights, the same on both ranks: true
	// per rank: weights 19392 B, gradients 9696 B, AdamW moments 19392 B
}
