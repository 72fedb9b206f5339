package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/agentrl/agentrl/policy"
)

// shape is one model the benchmark trains: a Qwen3 configuration with
// random weights, and the batch of a step.
type shape struct {
	name   string
	cfg    policy.Config
	seqs   int // sequences per step
	seqLen int // tokens per sequence
}

// qwen3 returns a Qwen3 configuration with the published models' fixed
// parts (head dim 128, 8 KV heads, RoPE θ 1e6, ε 1e-6, tied embeddings,
// vocabulary 151,936 — Qwen/Qwen3-0.6B, -1.7B and -4B config.json) and the
// sizes given.
func qwen3(hidden, intermediate, layers, heads int) policy.Config {
	return policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 151936, HiddenSize: hidden, IntermediateSize: intermediate,
		NumHiddenLayers: layers, NumAttentionHeads: heads, NumKeyValueHeads: 8, HeadDim: 128,
		MaxPositionEmbeddings: 40960, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true,
		EOSTokenIDs: []int{151645},
	}
}

// shapes are the models the -shapes flag names: the three of the issue
// at its batches (8 × 1,024 tokens, 4 × 1,024 at 4B), and a tiny one for
// checking the program itself on a CPU or under the emulator.
func shapes() map[string]shape {
	return map[string]shape{
		"qwen3-0.6b": {name: "Qwen3-0.6B", cfg: qwen3(1024, 3072, 28, 16), seqs: 8, seqLen: 1024},
		"qwen3-1.7b": {name: "Qwen3-1.7B", cfg: qwen3(2048, 6144, 28, 16), seqs: 8, seqLen: 1024},
		"qwen3-4b":   {name: "Qwen3-4B", cfg: qwen3(2560, 9728, 36, 32), seqs: 4, seqLen: 1024},
		"tiny": {name: "tiny", seqs: 2, seqLen: 16, cfg: policy.Config{
			ModelType: policy.ModelQwen3, VocabSize: 512, HiddenSize: 64, IntermediateSize: 128,
			NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 16,
			MaxPositionEmbeddings: 256, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true,
			EOSTokenIDs: []int{0},
		}},
	}
}

// parseShapes reads a comma-separated list of shape names, in order,
// each with an optional batch override "name:SEQSxLEN".
func parseShapes(list string) ([]shape, error) {
	known := shapes()
	var out []shape
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, batch, hasBatch := strings.Cut(f, ":")
		s, ok := known[strings.ToLower(name)]
		if !ok {
			names := make([]string, 0, len(known))
			for k := range known {
				names = append(names, k)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("unknown shape %q; known: %s", name, strings.Join(names, ", "))
		}
		if hasBatch {
			var n, l int
			if _, err := fmt.Sscanf(batch, "%dx%d", &n, &l); err != nil || n < 1 || l < 2 || fmt.Sprintf("%dx%d", n, l) != batch {
				return nil, fmt.Errorf("shape %q: batch %q, want SEQSxLEN with SEQS ≥ 1 and LEN ≥ 2 (e.g. 8x1024)", name, batch)
			}
			if l > s.cfg.MaxPositionEmbeddings {
				return nil, fmt.Errorf("shape %q: %d tokens per sequence exceed max_position_embeddings %d", name, l, s.cfg.MaxPositionEmbeddings)
			}
			s.seqs, s.seqLen = n, l
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no shape given")
	}
	return out, nil
}

// lens returns the sequence lengths of the shape's batch.
func (s shape) lens() []int {
	l := make([]int, s.seqs)
	for i := range l {
		l[i] = s.seqLen
	}
	return l
}

// tokens is the number of tokens of a step.
func (s shape) tokens() int { return s.seqs * s.seqLen }
