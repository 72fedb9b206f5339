package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/record"
)

// newChat makes the Recorder of Config.Chat over the server's own
// generation.
func (s *Server) newChat(cfg record.Config) (*record.Recorder, error) {
	if cfg.Sampler != nil {
		return nil, fmt.Errorf("%w: Chat.Sampler must be nil: the server samples with its model", ErrConfig)
	}
	cfg.Sampler = chatSampler{s}
	if cfg.Name == "" {
		cfg.Name = s.name
	}
	if cfg.MaxContext == 0 {
		cfg.MaxContext = s.lim.maxLen
	}
	if cfg.LogprobsMode == "" {
		cfg.LogprobsMode = s.mode
	}
	rec, err := record.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: Chat: %w", ErrConfig, err)
	}
	return rec, nil
}

// Recorder returns the recorder of the chat completions (Config.Chat),
// or nil when the server serves none: its sessions are what the
// agents' calls recorded.
func (s *Server) Recorder() *record.Recorder { return s.chat }

// chatPath reports whether path is one of the Recorder's routes.
func chatPath(path string) bool {
	return path == "/v1/chat/completions" || strings.HasPrefix(path, "/v1/sessions/") || strings.HasPrefix(path, "/sessions/")
}

// chatSampler is the server's generation as an lm.Sampler for the
// Recorder: admitted as completions are (pauses hold it back, reloads
// wait for it), on the base weights, whose version each generation
// carries. A generation that a pause or a weight update aborts, or that
// the server's closing ends, is record.ErrUnavailable (503).
type chatSampler struct{ s *Server }

func (c chatSampler) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	reqs = slices.Clone(reqs)
	for i := range reqs {
		reqs[i].Session = "" // the server's prefix cache assigns sessions
	}
	// The Recorder asks for a call's n choices as n requests of one
	// prompt: the server's prefix cache gives the first of them the
	// session holding the longest prefix and the others sessions of
	// their own, as it does for a completion's n.
	n := 1
	if len(reqs) > 1 && slices.IndexFunc(reqs, func(r lm.GenerateRequest) bool { return !slices.Equal(r.Prompt, reqs[0].Prompt) }) < 0 {
		n = len(reqs)
	}
	out, err := c.s.generate(ctx, reqs, n, "")
	switch {
	case errors.Is(err, ErrClosed):
		return nil, fmt.Errorf("%w: %w", record.ErrUnavailable, err)
	case err != nil:
		return nil, err
	case out.cut(len(reqs)):
		return nil, fmt.Errorf("%w: the generation was aborted by a pause or a weight update", record.ErrUnavailable)
	}
	for i := range out.gens {
		out.gens[i].WeightVersion = out.eng.version
	}
	return out.gens, nil
}

// serveChat hands a chat route to the Recorder, or answers OpenAI's 404
// when the server has none.
func (s *Server) serveChat(w http.ResponseWriter, r *http.Request) bool {
	if !chatPath(r.URL.Path) {
		return false
	}
	if s.chat == nil {
		writeOpenAIError(w, &apiError{Status: http.StatusNotFound, Type: "NotFoundError",
			Message: fmt.Sprintf("Invalid URL (%s %s): this server has no chat template (serve.Config.Chat)", r.Method, r.URL.Path)})
		return true
	}
	s.chat.ServeHTTP(w, r)
	return true
}
