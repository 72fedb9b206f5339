package serve

import (
	"net/http"
	"strings"
)

// handleHealth serves GET /health: 200 with an empty body, 503 once the
// server is closed, as vLLM (vllm/entrypoints/serve/instrumentator/health.py)
// and SGLang answer. A pause does not make the server unhealthy.
func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	if _, closed := s.snapshot(); closed {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// modelCard is vLLM's ModelCard (vllm/entrypoints/openai/models/protocol.py).
type modelCard struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        *string           `json:"root"`
	Parent      *string           `json:"parent"`
	MaxModelLen *int              `json:"max_model_len"`
	Permission  []modelPermission `json:"permission"`
}

// modelPermission is vLLM's ModelPermission.
type modelPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

// handleModels serves GET /v1/models: vLLM's list of cards, first the
// served model's, whose id is the served name, root the checkpoint
// folder of the weights served, and max_model_len the context length;
// then one per loaded LoRA adapter, in load order, with the adapter's
// name as id, its folder as root, the served name as parent and no
// max_model_len, as vLLM lists them (OpenAIServingModels.
// show_available_models). owned_by is "agentrl".
func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": s.modelCards()})
}

// modelsPrefix starts the path of GET /v1/models/<id>.
const modelsPrefix = "/v1/models/"

// handleModel serves GET /v1/models/<id>, OpenAI's "retrieve model": the
// card /v1/models lists under that id (the served model or a loaded
// adapter; the id may hold slashes), or vLLM's 404 "The model `<id>` does
// not exist." as an OpenAI error object.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, modelsPrefix)
	for _, c := range s.modelCards() {
		if c.ID == id {
			writeJSON(w, http.StatusOK, c)
			return
		}
	}
	writeOpenAIError(w, unknownModel(id))
}

// modelCards are the cards of /v1/models: the served model's, then one
// per loaded adapter in load order.
func (s *Server) modelCards() []modelCard {
	s.mu.Lock()
	eng, adapters := s.eng, s.sortedAdaptersLocked()
	s.mu.Unlock()
	card := func(id, path string, created int64) modelCard {
		c := modelCard{
			ID: id, Object: "model", Created: created, OwnedBy: "agentrl",
			Permission: []modelPermission{{
				ID: "modelperm-" + randomHex(), Object: "model_permission", Created: created,
				AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*",
			}},
		}
		if path != "" {
			c.Root = &path
		}
		return c
	}
	base := card(s.name, eng.path, s.created)
	maxLen := s.lim.maxLen
	base.MaxModelLen = &maxLen
	cards := []modelCard{base}
	for _, a := range adapters {
		c := card(a.name, a.path, a.created)
		parent := s.name
		c.Parent = &parent
		cards = append(cards, c)
	}
	return cards
}

// modelInfo is SGLang's GET /model_info body
// (sglang/srt/entrypoints/http_server.py, get_model_info).
type modelInfo struct {
	ModelPath               *string  `json:"model_path"`
	TokenizerPath           *string  `json:"tokenizer_path"`
	IsGeneration            bool     `json:"is_generation"`
	PreferredSamplingParams *string  `json:"preferred_sampling_params"`
	WeightVersion           *string  `json:"weight_version"`
	HasImageUnderstanding   bool     `json:"has_image_understanding"`
	HasAudioUnderstanding   bool     `json:"has_audio_understanding"`
	ModelType               string   `json:"model_type"`
	Architectures           []string `json:"architectures"`
}

// handleModelInfo serves GET /model_info and its deprecated alias
// /get_model_info. model_path follows reloads; tokenizer_path is the
// initial ModelPath when the server has a tokenizer, as reloads keep it.
func (s *Server) handleModelInfo(w http.ResponseWriter, _ *http.Request) {
	eng, _ := s.snapshot()
	cfg := eng.model.Config()
	info := modelInfo{
		IsGeneration: true, WeightVersion: s.reported(eng),
		ModelType: cfg.ModelType, Architectures: []string{cfg.Architecture()},
	}
	if eng.path != "" {
		info.ModelPath = &eng.path
	}
	if s.tokenizerPath != "" {
		info.TokenizerPath = &s.tokenizerPath
	}
	writeJSON(w, http.StatusOK, info)
}

// handleWeightVersion serves GET /get_weight_version:
// {"weight_version": "<v>"}, as SGLang until late 2025 (null with
// EngineVLLM).
func (s *Server) handleWeightVersion(w http.ResponseWriter, _ *http.Request) {
	eng, _ := s.snapshot()
	writeJSON(w, http.StatusOK, map[string]*string{"weight_version": s.reported(eng)})
}

// handleIsPaused serves vLLM's GET /is_paused: {"is_paused": bool}.
func (s *Server) handleIsPaused(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"is_paused": s.isPaused()})
}
