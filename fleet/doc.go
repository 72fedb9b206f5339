// Package fleet trains against an inference fleet: rollouts are sampled
// by vLLM or SGLang servers (or by package serve, which speaks both
// APIs), and the trainer publishes its weights to them every few steps.
//
// A Fleet is a lm.Sampler over its servers (through policy/openai,
// with failover and retries) that knows which weights the servers hold.
// Publish writes the policy as a Hugging Face checkpoint into a folder
// the servers can read, atomically (a server never sees a partial
// checkpoint), and has every server load it through its own API:
//
//   - SGLang: POST /update_weights_from_disk {"model_path",
//     "weight_version", "flush_cache": true, "abort_all_requests": false}
//     alone (python/sglang/srt/entrypoints/http_server.py; the body is
//     UpdateWeightFromDiskReqInput in managers/io_struct.py). Its
//     tokenizer manager takes the model-update writer lock, which waits
//     for the requests of every client to end and holds new ones, so the
//     scheduler's cache flush finds nothing running. No
//     /pause_generation first: with generation paused the update skips
//     that lock, and another client's request paused in place fails the
//     flush's assertion and kills the scheduler.
//   - vLLM, with VLLM_SERVER_DEV_MODE=1: POST
//     /pause?mode=wait&wait_for_inflight_requests=true (releases before
//     "mode" read only the flag, and abort the requests in flight
//     without it; current ones take it as mode=wait), then POST
//     /collective_rpc {"method": "reload_weights", "kwargs":
//     {"weights_path"}}, then POST /resume
//     (vllm/entrypoints/serve/dev/rlhf/api_router.py and
//     dev/rpc/api_router.py); releases whose reload_weights takes no
//     arguments get {"method": "update_config", "args":
//     [{"model_config": {"model"}}]} first (Kind VLLMModelConfig).
//
// No turn ever mixes two weight versions: Publish waits for the turns in
// flight through the Fleet to end and holds new ones until every server
// has answered, and the servers' lock or pause makes the same promise
// for requests from elsewhere. Every generation carries the version that
// produced it (lm.Generation.WeightVersion); an SGLang server that
// reports another version than the one published is passed over, and
// when none is current the call fails naming the server
// (openai.ErrWeightVersion). vLLM's reload names no version, so the
// answers of a vLLM server are not checked after a Publish, even when the
// server reports versions of its own (package serve counts its reloads).
// A server that fails to
// take an update makes Publish fail with an error that names it.
//
// # Partial rollouts
//
// Waiting for the turns in flight makes a Publish as slow as the longest
// turn, and long agentic turns hold training up. With
// Config.PartialRollouts, Publish writes the checkpoint while sampling
// goes on, then holds new turns and has every server abort the
// generations in flight and load the checkpoint:
//
//   - SGLang: the same /update_weights_from_disk with
//     "abort_all_requests": true: the tokenizer manager aborts every
//     request (each answers meta_info.finish_reason {"type": "abort"}
//     with the output_ids and logprobs it generated, which is what
//     slime's partial rollouts keep, slime/rollout/sglang_rollout.py),
//     then takes the model-update writer lock, loads and flushes.
//   - vLLM: POST /pause?mode=abort (AsyncLLM.pause_generation's default
//     mode in vllm/v1/engine/async_llm.py: the requests in flight are
//     aborted and answer finish_reason "abort" with their output so
//     far), the reload, and /resume.
//   - package serve speaks both, and answers the partial output the same
//     way.
//
// The cut generations come back as lm.FinishAbort (through
// openai.Config.Partial) with the tokens and log-probabilities their
// weights generated and that version, and package rollout continues
// each turn from where it was cut under the new weights, recording the
// version of every token (rollout.Turn.Segments). No token is tagged
// with weights that did not sample it: a generation that finished while
// a Publish began may have reached its server after the abort and run
// whole on the new weights, so it is handed back as a cut before its
// first token and sampled again from the same prefix (see
// Fleet.Generate). Neither engine's other pause modes serve this: vLLM's
// "keep" and SGLang's "in_place" and "retract" (/pause_generation, then
// /continue_generation) resume the requests on the new weights without
// saying where the weights changed, and SGLang's update skips its lock
// while paused (see above). Not with Config.Adapter.
//
// # Versions
//
// A weight version counts optimizer steps: the trainer (agentrl's
// TrainerParts.Sync) publishes the policy it starts from as version
// "steps done" before its first rollout — 0 for a fresh run, the
// checkpoint's step for a resumed one — so that the servers surely hold
// the policy it trains, then version k after step k (every SyncEvery
// steps). A fresh run of two steps thus publishes versions 0, 1 and 2,
// and leaves an SGLang server reporting "2" (the version each update
// names). vLLM's reload names no version and vLLM reports none; package
// serve with its own defaults numbers such loads itself, the next
// integer each, so driven as a vLLM server it reports "3" after the same
// run: three loads after its "0".
//
// Before the first Publish the servers hold the weights they were started
// with, Config.Version, under their own name for it: SGLang's is
// "default" unless started with --weight-version (server_args.py). The
// fleet reads that name from the servers (GET /model_info, or
// /get_weight_version on older SGLang) before its first Generate, or in
// Check, and expects it until the first Publish; servers that disagree,
// or name a number other than Config.Version, fail with ErrVersion. A
// server keeps the last weights it loaded, so a second run against the
// servers of a first finds them at the first run's last version: start
// them again, set Config.Version to it, or let the fleet take the number
// they report (Config.AdoptVersion) — and publish the run's own weights
// before anything samples them.
//
// Check, called before training or evaluation, makes sure without
// changing anything that every server answers, serves the expected model
// and takes the fleet's updates (see Fleet.Check), so that a
// misconfigured fleet fails at once rather than at the first Publish.
//
// # LoRA adapters
//
// With Config.Adapter set, Publish publishes the policy's LoRA adapter
// instead of full weights, as verl, SkyRL and AReaL hot-load adapters
// into their engines: the servers keep the base weights they were
// started with, and each version's adapter (a PEFT folder:
// adapter_config.json and adapter_model.safetensors, written by
// lm.AdapterSaver, F32 or BF16 as Config.Save says) is written to
// Dir/v00000042 as full weights are, loaded on every server under the
// name "<Adapter>-v00000042" (Fleet.AdapterName), and named by every
// request from then on (openai.Config.Adapter: "model" for
// /v1/completions, "lora_path" for SGLang's /generate):
//
//   - vLLM, started with --enable-lora, --max-lora-rank at least the
//     adapter's rank and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True: POST
//     /v1/load_lora_adapter {"lora_name", "lora_path"}, later POST
//     /v1/unload_lora_adapter {"lora_name"}
//     (vllm/entrypoints/serve/lora/api_router.py).
//   - SGLang, started with --enable-lora, --max-lora-rank and
//     --lora-target-modules covering the adapter: POST /load_lora_adapter
//     {"lora_name", "lora_path", "pinned": false}, later POST
//     /unload_lora_adapter {"lora_name"} (http_server.py). SGLang scales
//     by lora_alpha/r whatever use_rslora says, so when an SGLang server
//     is among the servers the adapter is written with the scale folded
//     into lora_alpha (lm.AdapterSaveOptions.FoldScale), which every
//     reader turns back into the same scale.
//   - package serve speaks both.
//
// The servers load the new adapter while sampling goes on with the
// current one (no pause); then Publish waits for the turns in flight,
// switches sampling to the new name and version at once, and has each
// server unload the adapter it held before (one it no longer holds, a
// restarted server's, counts as unloaded). Versioned names tell which
// version produced each generation without a version field (vLLM echoes
// the adapter's name as the completion's "model", which the sampler
// checks) and need no in-place reload, which older vLLM releases lack; a
// name already loaded (a version published again) is unloaded and
// loaded again. As the base weights never change, the servers' own
// weight_version is not checked in this mode. A server that fails to
// load the adapter makes Publish fail naming it (ErrUpdate), as for full
// weights; the fleet switches when another server took it, and sampling
// passes over the servers without it, which refuse its name. Old
// folders beyond Keep are removed as for full weights. Until the first
// Publish the fleet samples the base model as version Config.Version, so
// a resumed run should publish its adapter before sampling.
package fleet
