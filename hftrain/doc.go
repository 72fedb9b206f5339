// Package hftrain builds a reinforcement-learning Trainer over a Hugging
// Face model folder: the wiring that every program training a real model
// repeats, in three calls.
//
//	m, err := hftrain.Load(ctx, "Qwen3-4B", hftrain.Options{})
//	defer m.Close()
//	prompts, _, err := m.LoadPrompts(ctx, []string{"train.parquet"}, tools, agentrl.PromptOptions{})
//	tr, err := m.NewTrainer(ctx, agentrl.GRPOTCR(), hftrain.Rollout{Tools: tools, MaxResponseTokens: 4096},
//		agentrl.TrainerParts{Prompts: prompts, Reward: score})
//	err = tr.Run(ctx, agentrl.RunConfig{Steps: 100})
//
// Load reads the folder (config.json, the safetensors weights,
// tokenizer.json and tokenizer_config.json with its chat template), opens
// the device that Options.Device chooses (package device: the CPU, or a
// GPU in binaries built with the agentrl_cuda tag; under a launcher of
// several ranks per machine, each rank's own GPU) and loads the model on
// it with the tokenizer's decoder (policy.WithDecoder), without which a
// sampler cannot honour stop strings.
//
// Model.LoadPrompts reads verl-format prompt files and renders each chat
// once with the model's chat template and the tools' schemas
// (agentrl.LoadPrompts), leaving out prompts the model's context cannot
// hold. Model.NewEngine builds the rollout engine over the model (or
// another sampler: a fleet of inference servers) with the tool-call
// parser and result format its chat template writes, and Model.NewTrainer the
// Trainer over both: the loss, the advantage estimator, the reward (one
// by one or by groups, as an LLM judge ranks them), the metrics log and
// data parallelism are the agentrl.TrainerParts a program gives it;
// NewTrainer fills in the policy, the engine and the context.
//
// Model.Save writes the trained policy back as a Hugging Face folder with
// the tokenizer files, for vLLM or for another run. package toymodel
// writes a tiny random Qwen3 to try all this on without a download.
package hftrain
