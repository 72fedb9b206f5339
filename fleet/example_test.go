package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"os"

	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/serve"
)

// A fleet of one server: sample from it, publish new weights, and sample
// again. The server here is package serve over a random two-layer model,
// which reports its weight version as SGLang does; in a real run the URLs
// are those of SGLang servers (Kind fleet.SGLang) or of vLLM servers
// started with VLLM_SERVER_DEV_MODE=1 (Kind fleet.VLLM), started over the
// checkpoint the policy was loaded from, and Dir is a folder every server
// reads under the same path. The trainer does the same through
// agentrl.TrainerParts.Sync.
func ExampleFleet_Publish() {
	ctx := context.Background()
	cfg := policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 64, HiddenSize: 16, IntermediateSize: 32,
		NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
		MaxPositionEmbeddings: 64, RMSNormEps: 1e-6, RopeTheta: 1e4,
		Extra: map[string]json.RawMessage{"initializer_range": json.RawMessage("0.5")},
	}
	served, err := policy.New(cfg, 1) // the weights the server starts with
	if err != nil {
		log.Fatal(err)
	}
	trained, err := policy.New(cfg, 2) // the policy after a training step
	if err != nil {
		log.Fatal(err)
	}
	defer trained.Close()
	srv, err := serve.New(serve.Config{Model: served})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	dir, err := os.MkdirTemp("", "fleet")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	f, err := fleet.New(fleet.Config{Servers: []fleet.Server{{URL: hs.URL, Kind: fleet.SGLang}}, Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	if err := f.Check(ctx); err != nil { // the server answers, serves the model, takes updates
		log.Fatal(err)
	}
	req := []lm.GenerateRequest{{Prompt: []int{1, 2, 3}, Params: lm.SampleParams{MaxNewTokens: 6}}} // greedy
	before, err := f.Generate(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	if err := f.Publish(ctx, 1, trained); err != nil { // written under dir, loaded by every server
		log.Fatal(err)
	}
	after, err := f.Generate(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	local, err := trained.Generate(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("version", before[0].WeightVersion, "then", after[0].WeightVersion)
	fmt.Println("the answer changed:", fmt.Sprint(before[0].Tokens) != fmt.Sprint(after[0].Tokens))
	fmt.Println("the server now samples the trained policy:", fmt.Sprint(after[0].Tokens) == fmt.Sprint(local[0].Tokens))
	// Output:
	// version 0 then 1
	// the answer changed: true
	// the server now samples the trained policy: true
}
