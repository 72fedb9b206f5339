package agentrl_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/serve"
)

// On-policy training against an inference fleet: the rollouts are
// sampled on the servers, one step ahead of training at most, and the
// trainer publishes its weights to them after every step (vLLM's
// /collective_rpc reload_weights here; SGLang's /update_weights_from_disk
// with fleet.SGLang). The servers must have been started over the
// checkpoint the policy was loaded from and read Dir under the same
// path. Here they are package serve playing vLLM, started by
// startServers; in a real run, the URLs of vLLM servers started with
// VLLM_SERVER_DEV_MODE=1 and --logprobs-mode processed_logprobs.
func ExampleTrainer_fleet() {
	ctx := context.Background()
	model, tok, urls, shared, stop := startServers(2)
	defer stop()

	f, err := fleet.New(fleet.Config{
		Servers: []fleet.Server{{URL: urls[0], Kind: fleet.VLLM}, {URL: urls[1], Kind: fleet.VLLM}},
		Dir:     shared, // every server reads the published weights here
		Sampler: openai.Config{LogprobsMode: openai.ProcessedLogprobs},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := f.Check(ctx); err != nil { // fail fast: each server answers and takes updates
		log.Fatal(err)
	}
	engine, err := rollout.NewEngine(rollout.Config{Sampler: f, Tokenizer: tok, MaxResponseTokens: 4})
	if err != nil {
		log.Fatal(err)
	}
	cfg := agentrl.GRPOTCR()
	cfg.PromptsPerStep, cfg.SamplesPerPrompt, cfg.MiniBatchSize, cfg.MicroBatchSize = 2, 4, 8, 8
	cfg.Sampling = lm.SampleParams{Temperature: 1, MaxNewTokens: 4}
	cfg.Overlong = nil
	cfg.MaxStaleness, cfg.SyncEvery = 1, 1 // sample one step ahead; publish after every step
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{
		Policy: model, Engine: engine, Reward: containsA, Sync: f, GroundTruthOptional: true,
		Prompts: []agentrl.Prompt{{ID: "q1", Text: "say a"}, {ID: "q2", Text: "say a"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Run(ctx, agentrl.RunConfig{Steps: 3}); err != nil {
		log.Fatal(err)
	}

	fmt.Println("the servers hold version", f.Version())
	published, _ := filepath.Glob(filepath.Join(shared, "v*"))
	for _, p := range published {
		fmt.Println("kept:", filepath.Base(p))
	}
	// Output:
	// the servers hold version 3
	// kept: v00000002
	// kept: v00000003
}

// containsA rewards a response that contains an "a".
func containsA(_ context.Context, in reward.Input) (reward.Output, error) {
	ok := strings.Contains(in.Response, "a")
	if ok {
		return reward.Output{Score: 1, Acc: true}, nil
	}
	return reward.Output{}, nil
}

// startServers saves a tiny random Qwen3 over a byte tokenizer, starts n
// package serve servers over that checkpoint, playing vLLM, and returns
// the policy to train (loaded from the same checkpoint), the tokenizer,
// the servers' URLs, a folder for the published weights, and a function
// that stops everything.
func startServers(n int) (*policy.Model, *tokenizer.Bytes, []string, string, func()) {
	root, err := os.MkdirTemp("", "agentrl-fleet")
	if err != nil {
		log.Fatal(err)
	}
	stops := []func(){func() { os.RemoveAll(root) }}
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	tok, err := tokenizer.NewBytes(tokenizer.BytesConfig{})
	if err != nil {
		log.Fatal(err)
	}
	m, err := policy.New(policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 256, HiddenSize: 16, IntermediateSize: 32, NumHiddenLayers: 1,
		NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8, MaxPositionEmbeddings: 64, RMSNormEps: 1e-6, RopeTheta: 1e4,
	}, 1)
	if err != nil {
		log.Fatal(err)
	}
	ckpt := filepath.Join(root, "start")
	if err := m.Save(ckpt, lm.SaveOptions{}); err != nil {
		log.Fatal(err)
	}
	m.Close()
	var urls []string
	for range n {
		sm, err := policy.Load(ckpt, policy.WithDecoder(tok.Decode))
		if err != nil {
			log.Fatal(err)
		}
		srv, err := serve.New(serve.Config{Model: sm, ModelPath: ckpt, Encode: tok.Encode, Decode: tok.Decode,
			LogprobsMode: openai.ProcessedLogprobs, Engine: serve.EngineVLLM})
		if err != nil {
			log.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		stops = append(stops, func() { hs.Close(); srv.Close() })
		urls = append(urls, hs.URL)
	}
	model, err := policy.Load(ckpt, policy.WithDecoder(tok.Decode))
	if err != nil {
		log.Fatal(err)
	}
	stops = append(stops, func() { model.Close() })
	shared := filepath.Join(root, "published")
	return model, tok, urls, shared, stop
}
