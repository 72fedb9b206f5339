// Package serve is an inference server for a policy.Model: vLLM's
// completions API and SGLang's /generate (token ids in, token ids and
// per-token log-probabilities out) with continuous batching, plus their
// weight-reload and pause endpoints, so that a trainer written against a
// fleet of real inference engines runs unchanged against one embedded
// server. It is the default that needs nothing installed, and the test
// double of package policy/openai that no one has to mock.
//
// A Server is an http.Handler:
//
//	m, _ := policy.Load(dir, policy.WithDecoder(tok.Decode))
//	srv, _ := serve.New(serve.Config{Model: m, ModelPath: dir, Encode: tok.Encode, Decode: tok.Decode})
//	defer srv.Close()
//	http.ListenAndServe("127.0.0.1:8000", srv)
//
// # Endpoints
//
// Completions, as vLLM's OpenAI-compatible server
// (vllm/entrypoints/openai/completion/protocol.py and serving.py), with
// SGLang's top-level "metadata": {"weight_version"}
// (sglang/srt/entrypoints/openai/serving_completions.py):
//
//	POST /v1/completions
//
// SGLang's native generation, as its http_server.py serves it
// (GenerateReqInput in sglang/srt/managers/io_struct.py, SamplingParams
// in sampling/sampling_params.py), answered with "text", "output_ids" and
// "meta_info" {id, finish_reason, prompt_tokens, completion_tokens,
// cached_tokens, weight_version, output_token_logprobs as [logprob,
// token id, text] with return_logprob}; policy/openai speaks it with
// APISGLangGenerate:
//
//	POST|PUT /generate              {"input_ids" | "text", "sampling_params", "return_logprob", "rid", …}
//
// A completion without max_tokens (or with null) generates at most 16
// tokens, the default of OpenAI's API, vLLM and SGLang alike. logprobs N
// returns, at each position, the sampled token's log-probability and, in
// top_logprobs, the sampled token and the N most likely ones (at most 20,
// vLLM's default --max-logprobs; -1, the whole vocabulary, is refused
// as vLLM refuses it), computed by the model's sampler
// (lm.SampleParams.TopLogprobs) at no cost to requests that do not ask.
//
// OpenAI's chat completions, with tools, streaming and per-session
// recording of every call's prompt and sampled tokens (package record;
// Config.Chat enables them, with the model's chat template):
//
//	POST /v1/chat/completions
//	POST /sessions/{id}/v1/chat/completions
//	POST /v1/sessions/{id}/reward
//	GET  /v1/sessions/{id}
//
// Information:
//
//	GET  /health                  200, empty body (503 once closed)
//	GET  /v1/models               vLLM's model list, with max_model_len, and the loaded adapters
//	GET  /v1/models/{id}          OpenAI's "retrieve model": one card of that list
//	GET  /model_info              SGLang's model_path, weight_version, …
//	GET  /get_model_info          SGLang's deprecated alias of /model_info
//	GET  /get_weight_version      {"weight_version"}
//	GET  /is_paused               vLLM: {"is_paused"}
//
// Weights and scheduling, in SGLang's spelling
// (sglang/srt/entrypoints/http_server.py, managers/io_struct.py):
//
//	POST /update_weights_from_disk  {model_path, load_format, abort_all_requests, weight_version, keep_pause, flush_cache, …}
//	POST /pause_generation          {"mode": "abort" | "retract" | "in_place"}
//	POST /continue_generation
//	GET|POST /flush_cache
//
// and in vLLM's development-mode spelling (VLLM_SERVER_DEV_MODE=1:
// vllm/entrypoints/serve/dev/rpc/api_router.py, rl/online/api_router.py,
// serve/dev/cache/api_router.py):
//
//	POST /collective_rpc            {"method": "reload_weights", "kwargs": {"weights_path": dir}}
//	                                {"method": "update_config", "args": [{"model_config": {"model": dir}}]}, then {"method": "reload_weights"}
//	POST /pause?mode=abort|wait|keep&wait_for_inflight_requests=true&clear_cache=true
//	POST /resume
//	POST /reset_prefix_cache
//
// LoRA adapters, in vLLM's spelling (VLLM_ALLOW_RUNTIME_LORA_UPDATING=True:
// vllm/entrypoints/serve/lora/api_router.py, openai/models/serving.py)
// and in SGLang's (http_server.py; LoadLoRAAdapterReqInput,
// UnloadLoRAAdapterReqInput and LoRAUpdateOutput in managers/io_struct.py):
//
//	POST /v1/load_lora_adapter      {"lora_name", "lora_path", "load_inplace"}   200 "Success: LoRA adapter '<name>' added successfully."
//	POST /v1/unload_lora_adapter    {"lora_name"}                                200 "Success: LoRA adapter '<name>' removed successfully."
//	POST /load_lora_adapter         {"lora_name", "lora_path", "pinned"}         {"success", "error_message", "loaded_adapters"}
//	POST /unload_lora_adapter       {"lora_name"}                                {"success", "error_message", "loaded_adapters"}
//
// # LoRA adapters
//
// A PEFT adapter folder (adapter_config.json and
// adapter_model.safetensors, as policy.Model.SaveAdapter writes it) loaded
// under a name is sampled by naming it: "model": <name> in
// /v1/completions (the answer's "model" names it back, as vLLM's), or
// "lora_path": <name> in /generate; /v1/models lists each adapter after
// the served model with the served name as "parent". Refusals come in
// each engine's shape: vLLM's 400 InvalidUserInput for an empty field or
// a name already loaded (unless load_inplace), 404 NotFoundError for a
// folder without an adapter or an unload of a name not loaded, 404 "The
// model `<name>` does not exist." for a completion naming neither;
// SGLang's 400 {"success": false, "error_message"} for a load or unload
// that fails, 400 "The following requested LoRA adapters are not loaded"
// for a /generate naming one that is not. An adapter that does not fit
// the served model (another architecture) answers 400 on either API
// (vLLM answers 500 for its engine's failure).
//
// Each adapter runs on a copy of the served weights with the adapter
// attached (policy.Model.LoadAdapter): memory for a second model per
// adapter, which is fine for the embedded default; any rank is taken.
// The copy is taken when the base model is idle between generations.
// Loading never pauses generation; an unload refuses new requests for
// the adapter at once and returns once those in flight on it have
// finished, as SGLang's does. A reload of the base weights moves every
// adapter onto the new weights in the same exclusive section, so that an
// adapter's generations, like the base model's, never mix two weight
// versions; their weight_version is the base weights'. Adapter loads,
// unloads and reloads run one at a time.
//
// # Errors
//
// The OpenAI-compatible routes (/v1/…), an unknown path (404 "Invalid
// URL (POST /v1/embeddings)", as OpenAI's API words it) and a known
// path asked with another method (405, with an Allow header) answer
// OpenAI's error object {"error": {"message", "type", "param", "code"}},
// which OpenAI's clients read; vLLM and SGLang answer an unknown path with
// FastAPI's {"detail": "Not Found"}, which those clients show as "(no
// body)". The engines' own routes answer in their engine's shape:
// SGLang's flat {"object": "error", …}, vLLM's development routes'
// {"detail"} or {"error": msg}.
//
// # Engine defaults
//
// Config.Engine makes the server play one engine where vLLM's or
// SGLang's defaults differ from this server's own, so that a client
// tested against it meets what the real engine would do:
//
//   - EngineVLLM: no weight version is reported, as vLLM reports none:
//     completions carry no "metadata", and /generate's meta_info,
//     /model_info and /get_weight_version give weight_version null.
//   - EngineSGLang: the weights start at version "default" (SGLang's
//     --weight-version, server_args.py); /update_weights_from_disk
//     without weight_version keeps the version; and /generate refuses an
//     explicit max_new_tokens that with the prompt reaches the context
//     (TokenizerManager._validate_one_request).
//
// Without it, every answer names its weight version, the weights start at
// "0" and a reload without a version takes the next integer. Either
// way both APIs are served, and unknown request members are ignored
// where the engines ignore them (vLLM's completion requests, SGLang's
// request bodies), while SGLang's sampling_params refuse an unknown key
// as SGLang's SamplingParams(**params) does.
//
// # Weight versions
//
// No request ever mixes two weight versions. A reload first loads the new
// checkpoint (generation goes on meanwhile), then holds new completions
// back, waits until none runs on the old weights (or aborts them when
// asked to), swaps the models, closes the old one, sets the new weight
// version, and only then admits the requests it held back. Every
// completion's metadata.weight_version (meta_info.weight_version from
// /generate) names the weights that generated all of its tokens. A checkpoint that fails to load, or whose tensors do
// not match the served model's, leaves the old weights serving.
//
// Where this server differs from vLLM and SGLang, it says so on the
// endpoint; in short: no streaming, no echo, no prompt log-probabilities,
// "keep"/"in_place" pauses wait for the requests in flight instead of
// freezing them, and a reload never changes the served model name. /generate also takes one sampling_params
// object for all its prompts, no parallel sampling (n > 1), no top
// log-probabilities, no max_new_tokens 0, ignores skip_special_tokens,
// takes one adapter per request (lora_path the same for every prompt), and
// returns the log-probabilities of LogprobsMode (raw or processed), where
// SGLang by default scales by the temperature but does not truncate.
//
// # Partial output
//
// A pause or reload in abort mode ends each generation in flight with
// finish_reason "abort" ({"type": "abort"} from /generate) and answers
// what it generated until then — its tokens, their log-probabilities,
// and the weight version that generated them — as vLLM and SGLang do: a
// client continues it under the new weights by sending the prompt with
// those tokens appended (policy/openai.Config.Partial returns it as
// lm.FinishAbort; package rollout continues the turn). A generation
// aborted before its first token answers none.
//
// The reload endpoints read any folder the process can read, as vLLM's
// development endpoints and SGLang's do: serve on localhost or a private
// network.
//
// serve may import policy, policy/openai and record only.
package serve
