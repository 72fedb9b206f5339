package policy_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// Train a LoRA adapter on a frozen base with the optimizer state on the
// model's backend, then save it as a PEFT folder and load it onto a
// fresh copy of the base.
func ExampleModel_AddLoRA() {
	ctx := context.Background()
	m, err := policy.Load("testdata/model/qwen3-tiny")
	if err != nil {
		panic(err)
	}
	defer m.Close()
	cfg := policy.LoRAConfig{Rank: 4, Alpha: 8, TargetModules: []string{policy.LoRAAllLinear}}
	if err := m.AddLoRA(cfg, 1); err != nil {
		panic(err)
	}
	fmt.Printf("scale %.1f, %d adapter tensors, first %s\n", cfg.Scale(), len(m.Params()), m.Params()[0].Name)

	opt, err := m.NewDeviceAdamW(policy.AdamWConfig{LR: 1e-2})
	if err != nil {
		panic(err)
	}
	batch := lm.TokenBatch{Tokens: [][]int{{5, 17, 3, 99}}}
	for range 3 {
		_, backward, err := m.Forward(ctx, batch, true)
		if err != nil {
			panic(err)
		}
		// L = −Σ logp: dL/dlogp = −1 on the predicted tokens.
		if err := backward(ctx, [][]float32{{0, -1, -1, -1}}, nil); err != nil {
			panic(err)
		}
		if _, err := opt.Step(); err != nil {
			panic(err)
		}
		if err := opt.ZeroGrad(); err != nil {
			panic(err)
		}
	}

	dir, err := os.MkdirTemp("", "adapter")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := m.SaveAdapter(dir, lm.AdapterSaveOptions{}); err != nil {
		panic(err)
	}
	base, err := policy.Load("testdata/model/qwen3-tiny")
	if err != nil {
		panic(err)
	}
	defer base.Close()
	if err := base.LoadAdapter(dir); err != nil {
		panic(err)
	}
	a, _, _ := m.Forward(ctx, batch, false)
	b, _, _ := base.Forward(ctx, batch, false)
	fmt.Println("same log-probs after the round trip:", fmt.Sprint(a.LogProbs) == fmt.Sprint(b.LogProbs))
	// Output:
	// scale 2.0, 28 adapter tensors, first base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight
	// same log-probs after the round trip: true
}
