// Package advantage computes per-token advantages and returns from
// per-trajectory scores, with the estimators and names of verl
// (verl/trainer/ppo/core_algos.py): grpo, drgrpo, rloo,
// reinforce_plus_plus, reinforce_plus_plus_baseline, gpg, opo, remax,
// grpo_passk and gae.
//
// A batch is an Input: one score and one group id (the prompt) per
// trajectory, and a 0/1 mask per response token, 0 on tool output that the
// policy did not produce. Rows are ragged: each row is exactly one
// trajectory's response, with no padding. A Config names the estimator
// (Config.Estimator) and holds its hyper-parameters; Compute runs the
// built-in estimator it names, and a Registry adds estimators of one's
// own. Config{} is verl's grpo with verl's default hyper-parameters.
//
// advantage and loss follow one set of conventions: a name is a typed
// string (Estimator here, loss.Mode there) with a constant for every
// built-in, spelled as verl spells it; the name is a field of the Config
// (Config.Estimator, loss.Config.Mode), so that one value describes the
// computation; a zero field means verl's default, and a field whose zero
// is a meaningful setting different from its default (NormByStd false,
// Gamma 0, Lambda 0) is a pointer, nil meaning the default; a Registry's
// zero value (and a nil *Registry) holds the built-ins, Register adds a
// name but never replaces one, Names is sorted, and a Registry is safe for
// concurrent use; and Compute(cfg, batch) runs the built-ins.
//
// All arithmetic is float64; outputs are float32, the dtype of the loss.
// Advantages are 0 on mask-0 tokens. Bad input (mismatched lengths, NaN or
// Inf, an empty batch, an unknown name, a missing input) is an error that
// wraps a sentinel (errors.Is) and, where it concerns a field, is a
// *FieldError naming the field and the row and token (errors.As). Nothing
// panics on any input.
//
// Where this package departs from verl, on purpose, the doc comment of the
// estimator says so: advantages are zeroed on mask-0 tokens for every
// estimator (verl leaves gae and remax values there, which no loss reads),
// reinforce_plus_plus carries its return through tool-output tokens
// instead of resetting it (verl issue #7278, fixed in verl PR #7300), and a
// trajectory's score sits on its last mask-1 token even when its response
// ends inside a tool output (see Input).
//
// advantage depends on nothing else in agentrl.
package advantage
