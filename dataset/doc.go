// Package dataset reads training data: verl-format parquet and JSONL
// prompt sets, the Open-AgentRL math and code layouts, and multi-turn SFT
// conversations turned into token ids with a loss mask; it also provides
// deterministic per-epoch shuffling with a resumable position and DAPO's
// dynamic sampling.
//
// Prompt sets: OpenParquet and OpenJSONL (or Open, by extension, and Load
// for several files) yield Examples in verl's layout — prompt, data_source,
// ability, reward_model {ground_truth, style}, extra_info — with every other
// field kept. Parquet files are read row group by row group through
// github.com/parquet-go/parquet-go (behind recover: it panics on some
// corrupt files), and rows are assembled from their repetition and
// definition levels here. Ground truths come as a
// string, a number, a list or an object (GroundTruth); code tests, in any of
// the layouts verl and Open-AgentRL use, come from Example.Tests.
//
// Generic values (extra fields, extra_info, object ground truths) follow one
// model whatever the source format: nil, bool, int64, float64, string,
// []any and map[string]any. Parquet integers of every width become int64
// (unsigned ones above MaxInt64 are an error), float32 becomes float64, byte
// arrays become strings, timestamps RFC 3339 strings, dates YYYY-MM-DD,
// integer decimals float64, UUIDs their canonical text; LIST and MAP columns
// (and the legacy list layouts) become lists and maps. JSON numbers become
// int64 when they are integers that fit, float64 otherwise. A parquet struct column gives every row all of its keys (nil
// where a row had none), as pyarrow does.
//
// Errors name the file, the row (and line, for JSONL) and the field, and
// wrap ErrMalformed (bad row content) or ErrCorruptFile (a file that cannot
// be decoded).
//
// Sampling: Sampler yields batches of indices in a per-epoch order fixed by a
// seed through a documented algorithm (see Permutation), and saves and
// restores its position (SamplerState, JSON). GroupFilter implements DAPO's
// dynamic sampling (verl's algorithm.filter_groups) over any trajectory type.
//
// SFT: OpenSFT (or NewSFTJSONLReader, LoadSFT) reads multi-turn
// conversations — a messages list (system, user, assistant, tool; assistant
// tool_calls and reasoning_content) and optional tools — from JSON Lines or
// verl's multi-turn SFT parquet layout (Open-AgentRL's SFT set). Tool-call
// arguments and tool schemas stay raw JSON, so their key order reaches the
// chat template. SFTEncoder renders each conversation once with the
// tokenizer's chat template, tokenizes it once, and sets the loss mask to 1
// exactly on the assistant turns' trained text (thinking as rendered,
// content, tool-call markup, end-of-turn token), found by prefix renderings
// or, when the template rewrites earlier turns (Qwen3 drops their
// reasoning), by the turn delimiters; see SFTEncoder.Encode. Truncation
// follows verl's "error", "left" and "right".
//
// dataset may import policy/tokenizer; it must not import rollout, reward,
// advantage, loss or the root package.
package dataset
