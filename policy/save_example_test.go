package policy_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// Save writes the Hugging Face layout that transformers and vLLM load,
// sharded above MaxShardBytes as save_pretrained shards; Load reads it
// back, shards and index included, and the reloaded model computes the
// same log-probabilities.
func ExampleModel_Save() {
	ctx := context.Background()
	m, err := policy.Load("testdata/model/qwen3-tiny")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	dir, err := os.MkdirTemp("", "saved")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := m.Save(dir, lm.SaveOptions{MaxShardBytes: 64 << 10}); err != nil {
		log.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	back, err := policy.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer back.Close()
	batch := lm.TokenBatch{Tokens: [][]int{{5, 17, 3, 99}}}
	a, _, err := m.Forward(ctx, batch, false)
	if err != nil {
		log.Fatal(err)
	}
	b, _, err := back.Forward(ctx, batch, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same log-probs:", fmt.Sprint(a.LogProbs) == fmt.Sprint(b.LogProbs))
	// Output:
	// config.json
	// model-00001-of-00002.safetensors
	// model-00002-of-00002.safetensors
	// model.safetensors.index.json
	// same log-probs: true
}
