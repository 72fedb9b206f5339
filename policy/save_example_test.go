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

// WriteModel writes the folder Save writes from weights held elsewhere
// (here a map; a program converting a training checkpoint reads them
// from its file), one tensor of the config at a time.
func ExampleWriteModel() {
	cfg, err := policy.ReadConfig("testdata/model/qwen3-tiny")
	if err != nil {
		log.Fatal(err)
	}
	weights := map[string][]float32{}
	for _, t := range cfg.TensorSpecs() {
		w := make([]float32, t.Size())
		for i := range w {
			w[i] = 0.01
		}
		weights[t.Name] = w
	}
	dir, err := os.MkdirTemp("", "written")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	read := func(name string, dst []float32) error {
		copy(dst, weights[name])
		return nil
	}
	if err := policy.WriteModel(dir, cfg, read, lm.SaveOptions{}); err != nil {
		log.Fatal(err)
	}
	m, err := policy.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	fmt.Println(m.Config().NumParams() == cfg.NumParams(), m.Params()[0].Data[0])
	// Output: true 0.01
}

// ReadStateInfo tells what an optimizer state folder holds, sharded
// over ranks or not, from the files' headers.
func ExampleReadStateInfo() {
	m, err := policy.Load("testdata/model/qwen3-tiny")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	opt, err := m.NewDeviceAdamW(policy.AdamWConfig{LR: 1e-3})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "state")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := opt.SaveStateFile(dir); err != nil {
		log.Fatal(err)
	}
	info, err := policy.ReadStateInfo(dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("sharded over %d ranks (0: not), step %d, %d parameters\n", info.WorldSize, info.Step, len(info.Params))
	// Output: sharded over 0 ranks (0: not), step 0, 24 parameters
}
