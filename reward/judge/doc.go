// Package judge turns a language model behind any OpenAI-compatible
// endpoint (vLLM, SGLang, package serve, a hosted API) into rewards: an
// LLM-as-judge.
//
// A Judge holds the endpoint (Config: base URL, model, the name of the
// environment variable with the API key) and what every request shares:
// a bound on requests in flight, a deadline per request, retries with
// exponential backoff and seeded jitter, an LRU cache of verdicts keyed
// by a hash of the whole request, and statistics (Stats: requests,
// retries, timeouts, failures, malformed replies, cache hits, fallbacks,
// tokens, latency) for a trainer's step metrics. Requests go through the
// official client, github.com/openai/openai-go/v3, to /chat/completions,
// or to /completions over a prompt rendered by Config.Render for servers
// without a chat endpoint.
//
// Two rewards are built on it:
//
//   - Pointwise, a reward.Func: the judge grades one response against a
//     rubric and a reference, ending its reply with <score>N</score>
//     (ParseScore).
//   - Ranking, a reward.GroupFunc: the judge sees the N responses to one
//     prompt together and scores each from 0 to 1 relative to the others,
//     as ART's RULER does, in a JSON object (ParseRanking).
//
// A judge never stalls or fails a batch over its own faults: a reply
// that does not parse is shown back to the judge with what was wrong and
// asked again, up to a configured number of times; after that, or when
// the requests keep failing (after their retries) or time out, the
// response (for Ranking, the whole group) gets the configured Fallback
// score, the Reason says why, and Stats counts it. A reward returns an
// error only when its context ends (and Ranking when a group's members
// have different prompts).
//
// Both compose with the rule-based rewards of package reward:
// reward.Gate and reward.GroupGate put a check before the judge (an
// ill-formed response gets the rule's score and costs no request),
// reward.Combine and reward.CombineGroup add weighted rule scores, and
// reward.BatchGroups scores a batch group by group.
//
// The judge reads the task from reward.Input.Prompt; fill it in where
// inputs are made.
package judge
