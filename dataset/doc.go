// Package dataset reads training data: verl-format parquet and JSONL
// prompt sets, the Open-AgentRL math and code layouts, and multi-turn SFT
// conversations turned into token ids with a loss mask; it also provides
// deterministic per-epoch shuffling with a resumable position and DAPO's
// dynamic sampling.
//
// dataset may import policy/tokenizer; it must not import rollout, reward,
// advantage, loss or the root package.
package dataset
