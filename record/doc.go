// Package record trains agents that are programs of their own: it
// serves OpenAI's chat completions API over any lm.Sampler (the policy
// being trained, a fleet of inference servers), records every call's
// exact prompt tokens, sampled tokens and log-probabilities under a
// session, and turns a session's calls into token-faithful
// rollout.Trajectory values. An agent written in any language against
// OpenAI's API runs unchanged: point its base URL at a Recorder (or at
// a serve.Server with Config.Chat), let it run an episode, post the
// episode's reward, and the trainer trains on what the model sampled.
// Agent Lightning, AReaL's ArealOpenAI and ART work this way.
//
//	rec, _ := record.New(record.Config{Sampler: model, Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok})
//	go http.ListenAndServe("127.0.0.1:8000", rec)
//	// the agent: base URL http://127.0.0.1:8000/sessions/ep-1/v1, then
//	//   POST /v1/sessions/ep-1/reward {"reward": 1}
//	s, _ := rec.Take("ep-1")
//	trajs, _ := rec.Trajectories(s, record.Split)
//
// A Source runs an agent program for every sample of a trainer's
// prompts and hands the trainer the trajectories and posted rewards
// (agentrl.TrainerParts.Source).
//
// # Routes
//
//	POST /v1/chat/completions                 OpenAI's chat completions (below)
//	POST /sessions/{id}/v1/chat/completions   the same, filed under session id
//	GET  /v1/models                           the one model served
//	POST /v1/sessions/{id}/reward             {"reward", "acc", "pred", "reason"}: ends the session
//	GET  /v1/sessions/{id}                    the session's calls: prompt and sampled token ids, log-probabilities, …
//
// A call's session is the path's ({id} in a base URL of
// /sessions/{id}/v1), else the X-Session-Id header's, else the
// request's "user" field. The path comes first because the base URL is
// the one setting every OpenAI client and agent framework exposes, so
// an unchanged program is pointed at its session by its configuration
// alone (Agent Lightning's LLM proxy routes its rollouts the same way,
// with base URLs {endpoint}/rollout/{rollout}/attempt/{attempt}/v1); a
// header suits programs that can set default headers, and "user",
// which clients pass through untouched, those that can set neither. A
// call without one is answered and not recorded (or refused, with
// Config.RequireSession). A session is created by its first call or by
// Open; its reward ends it: later calls get 409.
//
// # Chat completions
//
// Requests are OpenAI's (openai-python's ChatCompletionCreateParams):
// messages of roles system, developer (read as system), user, assistant
// (content, tool_calls with JSON-string arguments) and tool (content,
// tool_call_id), text content as a string or text parts; tools of type
// function; tool_choice "auto" or "none"; n (1 to 128 choices, sampled
// as one batch; with a seed, choice i > 0 samples with a seed derived
// from it, so that the choices differ); max_tokens or
// max_completion_tokens, temperature, top_p, seed, stop, logprobs and
// top_logprobs (at most 20), stream and stream_options.include_usage;
// and vLLM's top_k, min_p, chat_template_kwargs (template variables
// such as "enable_thinking": false) and return_token_ids (the answer
// then carries prompt_token_ids and each choice's token_ids). What this
// server does not do is refused with a 400 that says so, never ignored
// when it would change the answer: tool_choice "required" or a named function (they need constrained decoding),
// penalties, logit_bias, response_format other than text, audio, image
// parts. The request's "model" is echoed (or Config.Name is), never
// checked, since agents name their own; parallel_tool_calls is
// accepted and ignored, as vLLM does.
//
// The messages and tools are rendered with the model's chat template
// (tool-call arguments that are JSON strings holding an object are
// passed to the template as that object, as vLLM passes them) and
// sampled, always with log-probabilities. The answer's tool calls are
// those Config.ToolFormat's parser (Hermes by default) finds in the
// sampled text; its content is the text before the first call, or
// null; finish_reason is "tool_calls", "stop" or "length". A call the
// parser cannot read makes the whole text the content, with no tool
// call, as vLLM's parsers answer. Errors are OpenAI's error object.
//
// Streaming sends OpenAI's chat.completion.chunk events: the role, the
// content token by token (with each token's log-probabilities when
// asked), each tool call (its id and name, then its arguments), the
// finish reason, the usage with include_usage, and [DONE]. Samplers
// return whole generations, so the events are written once generation
// has ended.
//
// # Token faithfulness
//
// A call's prompt is never re-rendered from text the model wrote. When
// the conversation holds an assistant message that one of the session's
// calls answered with — sent back unchanged (its content and its tool
// calls' ids, names and arguments), after exactly that call's messages,
// tools and template variables — the prompt is that call's prompt and
// sampled tokens, then the tokens of what the template renders after
// the message: the end of the message beyond what the model wrote (for
// Qwen's templates the "\n" after the <|im_end|> it sampled, or
// "<|im_end|>\n" when max_tokens cut it), the tool results and user
// turns, the generation prompt. Rendering the conversation again would
// change what the model saw whenever the template renders an answer
// otherwise than the model wrote it: Qwen3's template drops an earlier
// answer's <think> block once a new user turn follows, writes tool-call
// arguments with its own spacing, and text re-encoded after decoding
// can split into other tokens. Call.Drift records each call where that
// would have happened, Stats.Drifted counts them, and the trajectory
// holds the tokens actually sampled (verl's token-in-token-out agent
// loop and its principle that training sees what the sampler saw).
//
// # Rewritten history
//
// Calls whose prompts extend an earlier call's prompt and sampled
// tokens form one trajectory: the tokens between (tool results, user
// turns, template glue) get loss mask 0, the sampled tokens mask 1. An
// agent that rewrites its history — it summarises or edits earlier
// turns, or branches from an earlier point — sends a prompt that
// extends no earlier call's tokens; so does a request with n > 1 whose
// unchosen choices the agent never sends back. Trajectories then either
// starts a new trajectory at that call (Split, the default: each
// trajectory stays token-faithful, each later call continues the latest
// trajectory it extends, every one but the session's end ends with
// StopRewritten, and the number of calls that extended none is the
// number of trajectories less one), or fails with ErrRewritten
// (Reject). The session's end is, of the trajectories that end in one
// of the last request's choices, the one that holds the most calls. A
// Source, which the trainer needs one trajectory per episode from,
// keeps the end (which the episode's reward judges) and counts the
// calls it drops in SourceStats.DroppedCalls and the episodes that
// dropped any in SourceStats.Rewritten.
//
// record may import lm, rollout, reward, policy/tokenizer and
// policy/openai; not policy (lm's TestLightDependencies pins this).
package record
