package judge

import "time"

// Stats counts what a Judge did: over its whole life (Judge.Stats) or
// since the last TakeStats.
type Stats struct {
	// Requests is the number of requests sent, retries included.
	Requests int64
	// Retries is the number of requests sent again after a failure.
	Retries int64
	// Timeouts is the number of requests that ran past Config.Timeout.
	Timeouts int64
	// Failures is the number of judgements given up because their
	// requests kept failing (or failed in a way not worth retrying).
	Failures int64
	// Malformed is the number of replies that did not parse as a verdict.
	Malformed int64
	// Verdicts is the number of replies that parsed.
	Verdicts int64
	// CacheHits is the number of judgements answered from the cache.
	CacheHits int64
	// Shared is the number of judgements that waited on an identical one
	// already in flight instead of asking again.
	Shared int64
	// Fallbacks is the number of responses scored with a fallback score
	// because their judgement reached no verdict (malformed or failed).
	Fallbacks int64
	// PromptTokens and CompletionTokens add up the usage the endpoint
	// reported.
	PromptTokens, CompletionTokens int64
	// LatencyTotal and LatencyMax are the sum and the largest of the
	// requests' durations, failed ones included.
	LatencyTotal, LatencyMax time.Duration
	// LastError is the last failed request's or malformed reply's error,
	// for diagnosis; empty when none.
	LastError string
}

// LatencyMean is the mean duration of a request; 0 when none was sent.
func (s Stats) LatencyMean() time.Duration {
	if s.Requests == 0 {
		return 0
	}
	return s.LatencyTotal / time.Duration(s.Requests)
}

// Metrics returns the counts as numbers for a metrics log, each key
// prefixed (say "judge/"): requests, retries, timeouts, failures,
// malformed, verdicts, cache_hits, shared, fallbacks, prompt_tokens,
// completion_tokens, and latency_mean_s and latency_max_s in seconds.
func (s Stats) Metrics(prefix string) map[string]float64 {
	return map[string]float64{
		prefix + "requests":          float64(s.Requests),
		prefix + "retries":           float64(s.Retries),
		prefix + "timeouts":          float64(s.Timeouts),
		prefix + "failures":          float64(s.Failures),
		prefix + "malformed":         float64(s.Malformed),
		prefix + "verdicts":          float64(s.Verdicts),
		prefix + "cache_hits":        float64(s.CacheHits),
		prefix + "shared":            float64(s.Shared),
		prefix + "fallbacks":         float64(s.Fallbacks),
		prefix + "prompt_tokens":     float64(s.PromptTokens),
		prefix + "completion_tokens": float64(s.CompletionTokens),
		prefix + "latency_mean_s":    s.LatencyMean().Seconds(),
		prefix + "latency_max_s":     s.LatencyMax.Seconds(),
	}
}

// Stats returns the counts over the Judge's life.
func (j *Judge) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.total
}

// TakeStats returns the counts since the previous TakeStats (or since
// New) and starts counting anew: a trainer calls it once per step to log
// the step's judge metrics. One consumer should call it; Stats is for
// everyone else.
func (j *Judge) TakeStats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.window
	j.window = Stats{}
	return s
}

// count applies update to both sets of counts.
func (j *Judge) count(update func(*Stats)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	update(&j.total)
	update(&j.window)
}
