package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ModelCard is one entry of a server's GET /v1/models answer, the fields
// read: vLLM's ModelCard (vllm/entrypoints/openai/models/protocol.py) and
// SGLang's (python/sglang/srt/entrypoints/openai/protocol.py) alike.
type ModelCard struct {
	// ID is the name requests use: the served model name, or a loaded
	// LoRA adapter's name.
	ID string
	// Root is the checkpoint or adapter folder the server names, if any.
	Root string
	// Parent is the base model's name for a LoRA adapter, "" for a base
	// model.
	Parent string
	// MaxModelLen is the context length in tokens; 0 when the card gives
	// none (vLLM and SGLang give none for an adapter).
	MaxModelLen int
}

// Models is a GET /v1/models answer: the cards in the server's order,
// the served model first on vLLM and SGLang.
type Models []ModelCard

// modelsAnswer is the JSON of GET /v1/models: {"object": "list",
// "data": [card, …]}.
type modelsAnswer struct {
	Data *[]struct {
		ID          *string          `json:"id"`
		Root        *string          `json:"root"`
		Parent      *string          `json:"parent"`
		MaxModelLen *json.RawMessage `json:"max_model_len"`
	} `json:"data"`
}

// ParseModels reads a GET /v1/models answer. Every card must have a
// non-empty string id; max_model_len, when present and not null, must be
// a positive integer. Errors wrap ErrBadResponse.
func ParseModels(data []byte) (Models, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: /v1/models: want a JSON object, got %.40q", ErrBadResponse, trimmed)
	}
	var a modelsAnswer
	if err := json.Unmarshal(trimmed, &a); err != nil {
		return nil, fmt.Errorf("%w: /v1/models: %v", ErrBadResponse, err)
	}
	if a.Data == nil {
		return nil, fmt.Errorf("%w: /v1/models: no \"data\" list", ErrBadResponse)
	}
	out := make(Models, 0, len(*a.Data))
	for i, c := range *a.Data {
		if c.ID == nil || *c.ID == "" {
			return nil, fmt.Errorf("%w: /v1/models: card %d has no id", ErrBadResponse, i)
		}
		card := ModelCard{ID: *c.ID}
		if c.Root != nil {
			card.Root = *c.Root
		}
		if c.Parent != nil {
			card.Parent = *c.Parent
		}
		if c.MaxModelLen != nil && string(bytes.TrimSpace(*c.MaxModelLen)) != "null" {
			if err := json.Unmarshal(*c.MaxModelLen, &card.MaxModelLen); err != nil || card.MaxModelLen < 1 {
				return nil, fmt.Errorf("%w: /v1/models: card %q: max_model_len %.40s is not a positive integer", ErrBadResponse, card.ID, *c.MaxModelLen)
			}
		}
		out = append(out, card)
	}
	return out, nil
}

// Served lists the names of the base models (the cards without a
// parent), in order.
func (m Models) Served() []string {
	var ids []string
	for _, c := range m {
		if c.Parent == "" {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// MaxModelLen is the context length of model's card when it gives one,
// else of the first card that gives one (the served model's, as adapters'
// cards give none); 0 when no card does.
func (m Models) MaxModelLen(model string) int {
	for _, c := range m {
		if c.ID == model && c.MaxModelLen > 0 {
			return c.MaxModelLen
		}
	}
	for _, c := range m {
		if c.MaxModelLen > 0 {
			return c.MaxModelLen
		}
	}
	return 0
}
