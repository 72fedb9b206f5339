// Package policy holds the model that agentrl trains: the transformer (Qwen3, Qwen2 and Llama from an
// HF config.json and safetensors), sampling with a KV cache, the AdamW
// optimizer and checkpoints.
//
// What the package provides, file by file:
//
//   - The interfaces the rest of the SDK builds to — lm.Sampler
//     (GenerateRequest → Generation, with a Session handle for reusing a
//     KV cache across the turns of a rollout) and lm.Trainable (per-token
//     log-probabilities and entropies with a paired backward) — live in
//     package lm, which imports no model; Model implements them.
//   - config.go: Config, parsed from and written to Hugging Face's
//     config.json for the model types the arch_*.go files register; the
//     tensor names and shapes a config implies (TensorSpecs,
//     CheckTensors), parameter count, verl-compatible FLOPs for MFU, and
//     RoPE frequencies.
//   - sample.go: token sampling from logits with vLLM's temperature,
//     min-p, top-k and top-p semantics and seeded randomness (the stop
//     conditions and incremental detokenisation are lm's).
//   - modules.go: the transformer as modules — linear (with its
//     optional LoRA adapter), RMSNorm, RoPE, attention, SwiGLU MLP,
//     decoder layer, embedding, LM head — each a forward and a backward
//     side by side over the backend's paired kernels, the backward
//     mirroring the forward; pass.go: the tape a computation runs on
//     (its buffers, the first error, what the backward needs).
//   - arch.go: the Llama layout that declares every tensor's Hugging
//     Face name once, and the table of architectures. arch_qwen3.go,
//     arch_qwen2.go, arch_llama.go: one model_type each, registered at
//     init — its defaults, how it reads and writes its own config.json
//     keys, its biases, Qwen3's q/k norm. A new Llama-family variant is
//     one more such file (arch.go's architecture says what goes into it)
//     and no other change.
//   - weights.go: the tensors, and where their newest values are (host
//     or backend) — what a computation uploads and what Params, Save
//     and a device optimizer copy back.
//   - model.go, model_train.go: Model over a backend.Backend (the CPU
//     backend of internal/cpu by default): random init (New), Logits, and
//     the Trainable implementation — packed batches of sequences of
//     different lengths, chunked log-prob/entropy over the vocabulary,
//     and the backward through every module into each parameter's
//     gradient.
//   - generate.go, generate_options.go: the Sampler implementation —
//     Generate, sessions, GenerateOptions and GenerateStats — which hands
//     the work to the generation engine of subpackage internal/generate:
//     a continuous-batching scheduler (chunked prefill beside decodes,
//     preemption when the KV cache is full), the paged KV cache's block
//     manager (reference counts, blocks shared by sessions and,
//     optionally, common prompt prefixes, copy on write of a shared,
//     partly filled block), sessions that keep a conversation's blocks
//     between turns (LRU-bounded), stop tokens and strings, and the
//     cache sized from the backend's memory. The engine reaches the
//     model only through generate.Model, which genModel implements: the
//     model's shape, its lock (a burst of generation holds it, so
//     training waits), its weights brought up to date, and one forward
//     step over a batch whose attention runs over the cache. Sampling
//     runs on the backend (backend.Decoder's SampleRows: only token ids
//     and log-probs reach the host), on backend.HostDecoder for a backend
//     without a Decoder of its own.
//   - checkpoint.go: Load and Save of Hugging Face checkpoint folders
//     (config.json, safetensors single or sharded, F32/F16/BF16).
//   - lora.go, lora_peft.go: LoRA adapters (AddLoRA, LoRAConfig with
//     rsLoRA scaling) on any of the q/k/v/o/gate/up/down projections,
//     with the base weights frozen (Params lists only the adapters),
//     applied by the linear modules, MergeLoRA and
//     UnmergeLoRA, and SaveAdapter/LoadAdapter in PEFT's folder format
//     (adapter_config.json, adapter_model.safetensors) that vLLM and
//     SGLang hot-load.
//   - optim.go, schedule.go: AdamW as torch.optim.AdamW, gradient-norm
//     clipping as torch.nn.utils.clip_grad_norm_, warmup/cosine schedules
//     as verl and transformers, and exact optimizer state save/restore.
//   - optim_device.go: the Optimizer interface the trainers step, and
//     DeviceAdamW, which keeps a Model's weights, gradients and moments
//     in backend buffers and runs the update there (backend.Optimizer),
//     bit for bit the host AdamW.
//
// Subpackage safetensors reads and writes checkpoint tensors. The
// transformer is written once over the backend interface of package
// policy/backend (paired forward/backward kernels); internal/cpu
// implements it for the CPU and package gpu for CUDA, and both pass the
// same conformance suite.
//
// policy must not import rollout, reward, advantage, loss, dataset or the
// root package: those depend on it, not the other way round.
package policy
