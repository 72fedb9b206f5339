// Package search is the search tool of agentic-search training (Search-R1,
// verl's search recipe, SkyRL, slime): a client of the retrieval-server
// API those projects share, and the tool a policy calls through it.
// Package search/bm25 serves the same API over a local corpus; package
// search/encyclopedia ships a small corpus with questions.
//
// # The API, as its sources have it
//
// Request, POST /retrieve (Search-R1 search_r1/search/retrieval_server.py,
// QueryRequest; verl's examples/sglang_multiturn/search_r1_like/
// local_dense_retriever/retrieval_server.py is the same):
//
//	{"queries": ["q1", "q2"], "topk": 3, "return_scores": true}
//
// "topk" may be null or absent: a falsy topk takes the server's --topk
// (default 3); "return_scores" defaults to false. SkyRL's server
// (examples/train/search/retriever/retrieval_server.py) takes one
// "query" string instead of "queries" and answers with one list.
//
// Response: one list per query, in order. With return_scores,
//
//	{"result": [[{"document": {"id": "0", "contents": "\"Title\"\ntext"}, "score": 0.83}, ...], ...]}
//
// and without, each item is the document itself:
//
//	{"result": [[{"id": "0", "contents": "\"Title\"\ntext"}, ...], ...]}
//
// The document is the corpus row as it is (the dense server returns
// datasets' row dict); Search-R1's BM25 retriever, when its Lucene index
// stores the rows, returns {"title", "text", "contents"} instead, the
// title being the first line without its quotes. slime's
// examples/search-r1/local_search_server.py sends return_scores false and
// reads item["contents"]. FastAPI writes the body with
// json.dumps(..., separators=(",", ":")).
//
// Corpus (Search-R1 example/corpus.jsonl, the wiki-18 corpus): JSON Lines
// of {"id": "0", "contents": "\"Evan Morris\"\nEvan L. Morris (January
// 26, 1977 – ...) was ..."}: the title in double quotes on the first line
// of contents, the passage after it. ReadCorpus reads it.
//
// Clients: verl (verl/tools/utils/search_r1_like_utils.py,
// call_search_api) sends {"queries", "topk", "return_scores": true} with
// Content-Type and Accept application/json, a 30 s timeout, up to 10
// attempts with k × 1 s between the k-th and the next, retrying HTTP 500,
// 502, 503, 504, connection errors and timeouts, failing at once on other
// statuses and on JSON it cannot decode. SkyRL's skyrl_gym/tools/search.py
// does the same per single query; slime sends one query per request with
// a 60 s timeout and no retry.
//
// Text for the model: verl writes each query's hits as
// "Doc i (Title: <first line>)\n<rest>\n\n", strips the string, joins the
// queries with "\n---\n" and hands the model
// json.dumps({"result": text}, ensure_ascii=False); an error becomes
// {"result": "Search error: ..."}. Search-R1 (search_r1/llm_agent/
// generation.py, _passages2string) and slime write "Doc i(Title: <first
// line>) <rest>\n" per hit, between <information> tags of their own loop.
// verl's tool schema (examples/sglang_multiturn/config/tool_config/
// search_tool_config.yaml): function "search", one required parameter
// "query_list", an array of strings; its metrics: query_count, status,
// total_results, api_request_error.
//
// # Client and Tool
//
// Client sends /retrieve requests, retries as verl does (ClientConfig),
// bounds the requests in flight and counts what it did (Stats). Its
// Search gathers concurrent calls — the trajectories of a rollout
// searching at the same time — into one request of up to MaxBatch
// queries, waiting at most BatchWait for company, since retrieval servers
// answer a batch at about the cost of one query. A call whose context
// ends stops waiting at once; a shared request is cancelled only when no
// call waits for it any more.
//
// Tool is verl's search tool over a Client (name "search", parameter
// query_list, verl's or Search-R1's text). Every failure has a defined
// result: bad arguments give verl's error text; a server that times out,
// answers 5xx after the retries, answers 4xx, hangs past the attempt
// timeout or sends something else than a /retrieve response gives a
// failed Result, its metadata (status "api_error", the failure's kind)
// and an error wrapping *Error; nothing panics or waits past the client's
// attempts and the caller's context.
//
// Where this package differs from verl: when no query found anything the
// model reads "No search results found." (verl does so only for an empty
// result list and otherwise shows an empty string); a call has at most
// ToolConfig.MaxQueries queries; a timed-out attempt is bounded as a
// whole, not per socket read.
//
// search depends on nothing else in agentrl except package tool and
// internal packages.
package search
