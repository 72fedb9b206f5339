// Package encyclopedia generates, and ships, a small corpus for agentic
// search: an encyclopedia of fictional people, towns, rivers, mountains,
// guilds and works, in Search-R1's corpus format, with questions that its
// passages answer, as verl prompt sets.
//
// Nothing in it can be known without searching: names are drawn from
// syllables, facts from a seeded random source. Each question names its
// subject as the subject's passage is titled and is answered by one
// passage (one hop: "In which town was Quaith Drandrourk born?") or two
// (the first names the entity whose passage holds the answer: "Which
// river flows through the town where Quaith Drandrourk was born?"); the
// answer is written verbatim in the last passage read. The test split's
// questions are about subjects no train question names.
//
// The shipped files, data/corpus.jsonl (300 passages), data/train.jsonl
// and data/test.jsonl, are Generate(DefaultConfig()) written out; Corpus,
// TrainQuestions and TestQuestions return them. Scaled gives the same
// world at other sizes, for measurements.
package encyclopedia
