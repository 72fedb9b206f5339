package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
	"github.com/agentrl/agentrl/tool/search/encyclopedia"
)

// The markup of a search call and an answer. The call is a Hermes tool
// call of the search tool (package tool/search: verl's "search" function,
// one parameter query_list), which the rollout engine's default parser
// reads; the answer is Search-R1's <answer> tag, which its exact-match
// reward reads.
const (
	callOpen    = "<tool_call>"
	callClose   = "</tool_call>"
	queryPrefix = `{"name": "search", "arguments": {"query_list": ["`
	querySuffix = `"]}}`
	answerOpen  = "<answer>"
	answerClose = "</answer>"
)

// specials are the byte tokenizer's named tokens: the chat markup (the
// first six, its control tokens), the tool-call and tool-result markup,
// the fixed text around a query, the answer tags and the start of a
// Search-R1 hit, each one token, as a trained BPE vocabulary would merge
// them. The text is unchanged; the sequences the tiny model trains on are
// shorter.
var specials = []string{
	"<|endoftext|>", arith.ImStart, arith.ImEnd, arith.ImStart + "system\n", arith.ImStart + "user\n", arith.ImStart + "assistant\n",
	callOpen, callClose, "<tool_response>", "</tool_response>", queryPrefix, querySuffix, answerOpen, answerClose,
	"Doc 1(Title: ", "Doc 2(Title: ", "Doc 3(Title: ",
}

// newTokenizer is the task's byte tokenizer: byte values, then the
// specials; responses end at <|im_end|> or <|endoftext|>; chats render as
// examples/arith's do (arith.ChatTemplate).
func newTokenizer() (*tokenizer.Bytes, error) {
	return tokenizer.NewBytes(tokenizer.BytesConfig{Specials: specials, EOS: []string{arith.ImEnd, "<|endoftext|>"}, ChatTemplate: arith.ChatTemplate})
}

// question is one question of the encyclopedia with the queries that
// find the passages answering it.
type question struct {
	encyclopedia.Question
	ID      string   // split-i
	Titles  []string // the titles of Evidence's passages, in order
	Queries []string // the queries that find them (query)
}

// kindWords are the words a query adds to an entity's name, by the
// entity's kind: a word its passage has and few others do. The name
// alone misses a quarter of the people, towns and mountains at top 1
// (BM25 ranks the shorter passages that mention them first); name and
// word find every one of the shipped corpus's 300 passages at top 1.
var kindWords = map[string]string{
	"person": "born", "town": "town", "river": "river", "mountain": "mountain", "guild": "founded", "work": "completed",
}

// secondHop is the kind of the entity a two-hop question's second
// passage is about, by the question's kind; the first passage is about
// the kind its name starts with ("person_birthplace_river": a person,
// then a town).
var secondHop = map[string]string{
	"person_birthplace_river": "town", "person_birthplace_province": "town", "town_river_mouth": "river",
	"river_source_height": "mountain", "mountain_climber_birthplace": "person", "guild_founder_profession": "person",
	"work_creator_birthplace": "person",
}

// query is the search for the passage about the entity called name, of
// kind: its name and the kind's word.
func query(name, kind string) string { return name + " " + kindWords[kind] }

// The ways a question's first search can be written (-query).
const (
	// queryQuestion searches with the question itself, as the models of
	// Search-R1 and its successors often begin: the subject's name is in
	// it, with the words of its kind ("town", "born", "river"), and BM25
	// finds the passage about it at top 1 for all but a few kinds.
	queryQuestion = "question"
	// queryName searches with the subject's name and its kind's word
	// (query), which the model has to cut out of the question.
	queryName = "name"
)

// questions returns the encyclopedia's questions of split, with the
// titles of their evidence and the queries that find them: the first
// written as first says (queryQuestion or queryName), the second hop's
// always the name the first passage gives and its kind's word.
func questions(enc *encyclopedia.Encyclopedia, split, first string) ([]question, error) {
	if first != queryQuestion && first != queryName {
		return nil, fmt.Errorf("first query %q: want %q or %q", first, queryQuestion, queryName)
	}
	titles := make(map[string]string, len(enc.Passages))
	for _, p := range enc.Passages {
		titles[p.ID] = p.Title
	}
	var out []question
	for _, q := range enc.Split(split) {
		kinds := []string{strings.SplitN(q.Kind, "_", 2)[0]}
		if q.Hops == 2 {
			kinds = append(kinds, secondHop[q.Kind])
		}
		x := question{Question: q, ID: fmt.Sprintf("%s-%d", split, len(out))}
		for i, id := range q.Evidence {
			if i >= len(kinds) || kindWords[kinds[i]] == "" {
				return nil, fmt.Errorf("encyclopedia question %q of kind %s: no query for its passage %d", q.Text, q.Kind, i+1)
			}
			x.Titles = append(x.Titles, titles[id])
			qy := query(titles[id], kinds[i])
			if i == 0 && first == queryQuestion {
				qy = q.Text
			}
			x.Queries = append(x.Queries, qy)
		}
		out = append(out, x)
	}
	return out, nil
}

// promptText is the chat prompt of q: the question as the user's turn,
// then the assistant's header.
func promptText(q question) string {
	return arith.ImStart + "user\n" + q.Text + arith.ImEnd + "\n" + arith.ImStart + "assistant\n"
}

// callText is the assistant's turn that searches for query.
func callText(query string) string { return callOpen + queryPrefix + query + querySuffix + callClose }

// answerText is the final assistant turn that answers a.
func answerText(a string) string { return answerOpen + a + answerClose + arith.ImEnd }

// groundTruth is q's ground truth as Search-R1's data scripts write it
// and the encyclopedia's question files hold it.
func groundTruth(q question) string {
	b, _ := json.Marshal(map[string][]string{"target": {q.Answer}})
	return string(b)
}

// prompts are the prompts of qs with their ground truths, data source
// "encyclopedia".
func prompts(qs []question) []agentrl.Prompt {
	out := make([]agentrl.Prompt, len(qs))
	for i, q := range qs {
		out[i] = agentrl.Prompt{ID: q.ID, Text: promptText(q), GroundTruth: groundTruth(q), DataSource: encyclopedia.DataSource,
			Extra: map[string]any{"kind": q.Kind, "hops": q.Hops}}
	}
	return out
}

// sftSet is the SFT data and what building it found.
type sftSet struct {
	Samples  []agentrl.SFTSample
	NoSearch int // trajectories that answer without searching
	Skipped  int // questions left out: a right query did not find its passage
	TooLong  int // questions left out: their searches and answer outrun the response budget
}

// buildSFT generates n SFT trajectories from the train questions, laid
// out as the rollout engine produces them: the prompt (mask 0); for each
// passage of the question's evidence, the call that searches for it
// (the question's query for it, mask 1) and the search tool's real answer
// in ChatML glue (mask 0); then the answer in <answer> tags and the end
// of the turn (mask 1). The second query of a two-hop question is a name
// the first passage gives, so the trajectories teach the model to copy
// the question (or the name in it) into its first query, a name from the
// passage into its second, and the answer from the last passage.
//
// The tool results are the search tool's own, through the retrieval
// server: a trajectory is right by construction only if each query finds
// its passage, so questions whose queries do not are left out and
// counted, as are those whose searching response would be longer than
// maxResponse tokens (a rollout could not write it). A fraction noSearch of the trajectories instead answer at
// once with a guess — the answer of a random train question of the same
// kind, as a model that has not read the passage might — so the SFT
// policy often skips the search and is wrong: the habit RL has to
// unlearn.
func buildSFT(ctx context.Context, qs []question, tok *tokenizer.Bytes, st tool.Tool, n, maxResponse int, noSearch float64, seed uint64) (sftSet, error) {
	results, err := searchAll(ctx, st, qs)
	if err != nil {
		return sftSet{}, err
	}
	var set sftSet
	byKind := map[string][]string{}
	var usable []question
	var responses []agentrl.SFTSample // usable[i]'s searching response
	for _, q := range qs {
		ok := true
		for i, title := range q.Titles {
			r := results[q.Queries[i]]
			// The hit is written `(Title: "<title>")`, JSON-escaped or not.
			if !strings.Contains(r, `"`+title+`"`) && !strings.Contains(r, `\"`+title+`\"`) {
				ok = false
			}
		}
		if !ok {
			set.Skipped++
			continue
		}
		resp := searching(q, results, tok)
		if len(resp.IDs) > maxResponse {
			set.TooLong++
			continue
		}
		usable = append(usable, q)
		responses = append(responses, resp)
		byKind[q.Kind] = append(byKind[q.Kind], q.Answer)
	}
	if len(usable) == 0 {
		return sftSet{}, fmt.Errorf("no question's queries find their passages within a response of %d tokens (%d questions, %d whose queries miss, %d too long)",
			maxResponse, len(qs), set.Skipped, set.TooLong)
	}
	r := rand.New(rand.NewPCG(seed, 11))
	set.Samples = make([]agentrl.SFTSample, n)
	for i := range set.Samples {
		j := r.IntN(len(usable))
		q := usable[j]
		var smp agentrl.SFTSample
		arith.AppendText(&smp, tok, promptText(q), 0)
		if r.Float64() < noSearch {
			guesses := byKind[q.Kind]
			arith.AppendText(&smp, tok, answerText(guesses[r.IntN(len(guesses))]), 1)
			set.NoSearch++
		} else {
			smp.IDs = append(smp.IDs, responses[j].IDs...)
			smp.Mask = append(smp.Mask, responses[j].Mask...)
		}
		set.Samples[i] = smp
	}
	return set, nil
}

// searching is the response of q's searching trajectory, given each
// query's result, laid out as the rollout engine produces it: each call
// (mask 1) and the search tool's answer in ChatML glue (mask 0), then the
// answer and the end of the turn (mask 1).
func searching(q question, results map[string]string, tok *tokenizer.Bytes) agentrl.SFTSample {
	var smp agentrl.SFTSample
	for _, qy := range q.Queries {
		call := callText(qy)
		arith.AppendText(&smp, tok, call, 1)
		arith.AppendText(&smp, tok, rollout.ChatML{}.Render(call, []string{results[qy]}), 0)
	}
	arith.AppendText(&smp, tok, answerText(q.Answer), 1)
	return smp
}

// searchAll calls st once for each distinct query of qs, concurrently
// (the search client sends concurrent calls to the retrieval server
// together, in batches), and returns each query's result.
func searchAll(ctx context.Context, st tool.Tool, qs []question) (map[string]string, error) {
	results := map[string]string{}
	var queries []string
	for _, q := range qs {
		for _, qy := range q.Queries {
			if _, ok := results[qy]; !ok {
				results[qy] = ""
				queries = append(queries, qy)
			}
		}
	}
	contents := make([]string, len(queries))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(searchConcurrency)
	for i, query := range queries {
		g.Go(func() error {
			args, _ := json.Marshal(map[string][]string{"query_list": {query}})
			res, err := st.Call(gctx, args)
			if err != nil {
				return fmt.Errorf("searching %q for the SFT trajectories: %w", query, err)
			}
			if res.Failed {
				return fmt.Errorf("searching %q for the SFT trajectories: %s", query, res.Content)
			}
			contents[i] = res.Content
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, query := range queries {
		results[query] = contents[i]
	}
	return results, nil
}

// searchConcurrency is how many of the SFT trajectories' searches are in
// flight at once: one full batch of the search client's (64 queries).
const searchConcurrency = 64
