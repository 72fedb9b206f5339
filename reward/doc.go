// Package reward scores responses: a math verifier (answer extraction,
// LaTeX parsing, exact and numeric equivalence), code tests run through a
// tool, DAPO overlong shaping, format and tool-use shaping, and routing by
// data source with bounded parallelism and per-item deadlines.
//
// reward may import tool; it must not import rollout, policy, advantage,
// loss or the root package.
package reward
