package policy_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
)

// A training step: clip the gradients, then let AdamW apply them with a
// warmup-then-cosine learning rate.
func ExampleAdamW() {
	w := lm.Param{Name: "w", Data: []float32{1, -1}, Grad: make([]float32, 2)}
	params := []lm.Param{w}
	opt, err := policy.NewAdamW(params, policy.AdamWConfig{
		LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01,
		Schedule: policy.CosineSchedule{WarmupSteps: 1, TotalSteps: 4, MinLRRatio: 0.1},
	})
	if err != nil {
		panic(err)
	}
	for step := 0; step < 4; step++ {
		// Gradient of ½‖w‖²: w itself, scaled up to show clipping.
		for i, v := range w.Data {
			w.Grad[i] = 10 * v
		}
		norm, err := policy.ClipGradNorm(params, 1.0)
		if err != nil {
			panic(err) // NaN/Inf gradients: skip the step instead
		}
		lr, err := opt.Step()
		if err != nil {
			panic(err)
		}
		fmt.Printf("step %d: grad norm %.3f, lr %.3f, w = [%.4f %.4f]\n", step+1, norm, lr, w.Data[0], w.Data[1])
	}
	// torch.optim.AdamW with LambdaLR and clip_grad_norm_ prints the same.
	//
	// Output:
	// step 1: grad norm 14.142, lr 0.000, w = [1.0000 -1.0000]
	// step 2: grad norm 14.142, lr 0.100, w = [0.8990 -0.8990]
	// step 3: grad norm 12.714, lr 0.078, w = [0.8208 -0.8208]
	// step 4: grad norm 11.608, lr 0.033, w = [0.7880 -0.7880]
}

// Sampling a token with temperature and nucleus (top-p) truncation, with a
// seeded generator for reproducibility.
func ExampleTokenSampler_Sample() {
	// Probabilities 0.4, 0.3, 0.2, 0.1.
	logits := []float32{float32(math.Log(4)), float32(math.Log(3)), float32(math.Log(2)), 0}
	s := policy.NewTokenSampler(rand.New(rand.NewPCG(42, 0)))
	// top-p 0.65 keeps tokens 0 and 1, renormalised to 4/7 and 3/7.
	r, err := s.Sample(logits, lm.SampleParams{Temperature: 1, TopP: 0.65})
	if err != nil {
		panic(err)
	}
	fmt.Printf("token %d, p = %.4f under the sampling distribution, %.4f under the raw softmax\n",
		r.Token, math.Exp(r.LogProb), math.Exp(r.RawLogProb))
	// Temperature 0 is greedy.
	r, _ = s.Sample(logits, lm.SampleParams{})
	fmt.Println("greedy:", r.Token)
	// Output:
	// token 0, p = 0.5714 under the sampling distribution, 0.4000 under the raw softmax
	// greedy: 0
}

// Detecting a stop string that the model writes across several tokens.
func ExampleStopChecker() {
	pieces := map[int]string{1: "The answer is 4", 2: "2</ans", 3: "wer>", 4: " trailing"}
	decode := func(ids []int) string {
		s := ""
		for _, id := range ids {
			s += pieces[id]
		}
		return s
	}
	stream := lm.NewTextStream(decode, nil)
	stop := lm.NewStopChecker(lm.SampleParams{MaxNewTokens: 10, Stop: []string{"</answer>"}}, []int{0})
	for _, tok := range []int{1, 2, 3, 4} {
		if st, done := stop.Next(tok, stream.Push(tok)); done {
			fmt.Printf("%s after token %d: %q\n", st.Reason, tok, stop.Text()[:st.TextEnd])
			break
		}
	}
	// Output:
	// stop after token 3: "The answer is 42"
}

// The weights a config.json implies, for loading and validating a
// checkpoint, and the numbers MFU accounting needs.
func ExampleParseConfig() {
	cfg, err := policy.ParseConfig([]byte(`{
		"model_type": "qwen3", "vocab_size": 1000, "hidden_size": 64,
		"intermediate_size": 128, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
		"tie_word_embeddings": true}`))
	if err != nil {
		panic(err)
	}
	for _, t := range cfg.TensorSpecs()[:8] {
		fmt.Println(t.Name, t.Shape)
	}
	fmt.Println("parameters:", cfg.NumParams())
	fmt.Printf("forward FLOPs/token at 512 tokens: %.0f\n", cfg.ForwardFLOPsPerToken(512))
	// Output:
	// model.embed_tokens.weight [1000 64]
	// model.layers.0.self_attn.q_proj.weight [64 64]
	// model.layers.0.self_attn.k_proj.weight [32 64]
	// model.layers.0.self_attn.v_proj.weight [32 64]
	// model.layers.0.self_attn.o_proj.weight [64 64]
	// model.layers.0.self_attn.q_norm.weight [16]
	// model.layers.0.self_attn.k_norm.weight [16]
	// model.layers.0.mlp.gate_proj.weight [128 64]
	// parameters: 138112
	// forward FLOPs/token at 512 tokens: 665600
}
