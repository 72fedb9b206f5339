package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// BPE is a byte-level BPE tokenizer read from a Hugging Face tokenizer.json
// (Qwen2/Qwen3, Llama 3, GPT-2 and others of that family). Its Encode gives
// the ids Hugging Face tokenizers' encode(text, add_special_tokens=False)
// gives; its methods are safe for concurrent use.
type BPE struct {
	model bpeModel
	// raw and normed match the added tokens with normalized false / true.
	raw, normed *addedMatcher
	nfc         bool
	steps       []preStep

	tokenToID map[string]int32 // added tokens and model vocabulary
	// Decoding: the bytes of token i are dec[decOff[i]:decOff[i+1]];
	// absent ids have an empty span.
	dec     []byte
	decOff  []uint32
	special []bool
	size    int

	// From tokenizer_config.json / generation_config.json (Load only).
	chatTemplate string
	eos          []int
	bosToken     string
	eosToken     string

	tplOnce sync.Once
	tpl     *ChatTemplate
	tplErr  error
}

// preStep is one pre-tokenizer of the pipeline; ByteLevel is always last.
type preStep struct {
	split          bool // a Split step with rule, else ByteLevel
	rule           splitRule
	addPrefixSpace bool // ByteLevel: prepend ' ' to a piece lacking one
	useRegex       bool // ByteLevel: split with GPT-2's pattern
}

// UnsupportedError names a tokenizer.json component this package cannot run.
type UnsupportedError struct {
	Component string // JSON path, e.g. "pre_tokenizer.pretokenizers[0]"
	What      string
}

// Error names the unsupported component of tokenizer.json and what of it.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("tokenizer: unsupported %s: %s", e.Component, e.What)
}

// ErrUnsupported is wrapped by every *UnsupportedError.
var ErrUnsupported = errors.New("unsupported tokenizer component")

// Unwrap makes errors.Is(err, ErrUnsupported) hold.
func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }

type hfFile struct {
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         *hfModel        `json:"model"`
}

type hfModel struct {
	Type                    string         `json:"type"`
	Dropout                 *float64       `json:"dropout"`
	UnkToken                *string        `json:"unk_token"`
	ContinuingSubwordPrefix *string        `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string        `json:"end_of_word_suffix"`
	ByteFallback            bool           `json:"byte_fallback"`
	IgnoreMerges            bool           `json:"ignore_merges"`
	Vocab                   map[string]int `json:"vocab"`
	Merges                  []hfMerge      `json:"merges"`
}

// hfMerge is one merge, written "a b" (older files) or ["a", "b"].
type hfMerge [2]string

func (m *hfMerge) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var pair []string
		if err := json.Unmarshal(b, &pair); err != nil {
			return err
		}
		if len(pair) != 2 {
			return fmt.Errorf("merge %s: want 2 tokens, have %d", b, len(pair))
		}
		m[0], m[1] = pair[0], pair[1]
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	a, c, ok := cutSpace(s)
	if !ok {
		return fmt.Errorf("merge %q: want two tokens separated by one space", s)
	}
	m[0], m[1] = a, c
	return nil
}

// cutSpace splits "a b" at its only space.
func cutSpace(s string) (string, string, bool) {
	i := strings.IndexByte(s, ' ')
	if i <= 0 || i == len(s)-1 || strings.IndexByte(s[i+1:], ' ') >= 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// typed is the {"type": ...} head of a component.
type typed struct {
	Type string `json:"type"`
}

// FromFile reads a tokenizer.json. Components it cannot run exactly give an
// error wrapping ErrUnsupported that names them. The result has no chat
// template and no EOS ids; Load reads those from the checkpoint folder.
func FromFile(path string) (*BPE, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse builds a BPE tokenizer from the contents of a tokenizer.json.
func Parse(data []byte) (*BPE, error) {
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: parse tokenizer.json: %w", err)
	}
	t := &BPE{}
	if err := t.setNormalizer(f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	if err := t.setPreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder, "decoder"); err != nil {
		return nil, err
	}
	if err := checkPostProcessor(f.PostProcessor, "post_processor"); err != nil {
		return nil, err
	}
	if err := t.setModel(f.Model); err != nil {
		return nil, err
	}
	if err := t.setAdded(f.AddedTokens); err != nil {
		return nil, err
	}
	return t, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func (t *BPE) setNormalizer(raw json.RawMessage, where string) error {
	if isNull(raw) {
		return nil
	}
	var n struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return fmt.Errorf("tokenizer: %s: %w", where, err)
	}
	switch n.Type {
	case "NFC":
		t.nfc = true
		return nil
	case "Sequence":
		for i, sub := range n.Normalizers {
			if err := t.setNormalizer(sub, fmt.Sprintf("%s.normalizers[%d]", where, i)); err != nil {
				return err
			}
		}
		return nil
	}
	return &UnsupportedError{Component: where, What: fmt.Sprintf("normalizer type %q (only NFC is supported)", n.Type)}
}

func (t *BPE) setPreTokenizer(raw json.RawMessage) error {
	if err := t.addPreTokenizer(raw, "pre_tokenizer"); err != nil {
		return err
	}
	if len(t.steps) == 0 || t.steps[len(t.steps)-1].split {
		return &UnsupportedError{Component: "pre_tokenizer", What: "no final ByteLevel step; only byte-level BPE is supported"}
	}
	return nil
}

func (t *BPE) addPreTokenizer(raw json.RawMessage, where string) error {
	if isNull(raw) {
		return nil
	}
	var p struct {
		Type           string            `json:"type"`
		Pretokenizers  []json.RawMessage `json:"pretokenizers"`
		Pattern        map[string]string `json:"pattern"`
		Behavior       string            `json:"behavior"`
		Invert         bool              `json:"invert"`
		AddPrefixSpace bool              `json:"add_prefix_space"`
		UseRegex       *bool             `json:"use_regex"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("tokenizer: %s: %w", where, err)
	}
	if n := len(t.steps); n > 0 && !t.steps[n-1].split {
		return &UnsupportedError{Component: where, What: fmt.Sprintf("%s after ByteLevel", p.Type)}
	}
	switch p.Type {
	case "Sequence":
		for i, sub := range p.Pretokenizers {
			if err := t.addPreTokenizer(sub, fmt.Sprintf("%s.pretokenizers[%d]", where, i)); err != nil {
				return err
			}
		}
		return nil
	case "Split":
		re, ok := p.Pattern["Regex"]
		if !ok {
			return &UnsupportedError{Component: where, What: fmt.Sprintf("Split pattern %v (only the Qwen2, Llama 3 and GPT-2 regexes are supported)", p.Pattern)}
		}
		rule, ok := ruleForPattern(re)
		if !ok {
			return &UnsupportedError{Component: where, What: fmt.Sprintf("Split regex %q (only the Qwen2, Llama 3 and GPT-2 regexes are supported)", re)}
		}
		if p.Behavior != "Isolated" || p.Invert {
			return &UnsupportedError{Component: where, What: fmt.Sprintf("Split behavior %q invert %v (only Isolated, not inverted)", p.Behavior, p.Invert)}
		}
		t.steps = append(t.steps, preStep{split: true, rule: rule})
		return nil
	case "ByteLevel":
		useRegex := p.UseRegex == nil || *p.UseRegex // Hugging Face's default is true
		t.steps = append(t.steps, preStep{addPrefixSpace: p.AddPrefixSpace, useRegex: useRegex})
		return nil
	}
	return &UnsupportedError{Component: where, What: fmt.Sprintf("pre-tokenizer type %q", p.Type)}
}

func checkDecoder(raw json.RawMessage, where string) error {
	if isNull(raw) {
		return &UnsupportedError{Component: where, What: "no decoder (only ByteLevel is supported)"}
	}
	var d struct {
		Type     string            `json:"type"`
		Decoders []json.RawMessage `json:"decoders"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("tokenizer: %s: %w", where, err)
	}
	switch {
	case d.Type == "ByteLevel":
		return nil
	case d.Type == "Sequence" && len(d.Decoders) == 1:
		return checkDecoder(d.Decoders[0], where+".decoders[0]")
	}
	return &UnsupportedError{Component: where, What: fmt.Sprintf("decoder type %q (only ByteLevel is supported)", d.Type)}
}

// checkPostProcessor accepts the post-processors that leave the ids of
// encode(text, add_special_tokens=False) alone, which is what Encode returns.
func checkPostProcessor(raw json.RawMessage, where string) error {
	if isNull(raw) {
		return nil
	}
	var p struct {
		Type       string            `json:"type"`
		Processors []json.RawMessage `json:"processors"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("tokenizer: %s: %w", where, err)
	}
	switch p.Type {
	case "ByteLevel", "TemplateProcessing":
		return nil
	case "Sequence":
		for i, sub := range p.Processors {
			if err := checkPostProcessor(sub, fmt.Sprintf("%s.processors[%d]", where, i)); err != nil {
				return err
			}
		}
		return nil
	}
	return &UnsupportedError{Component: where, What: fmt.Sprintf("post-processor type %q", p.Type)}
}

func (t *BPE) setModel(m *hfModel) error {
	const where = "model"
	switch {
	case m == nil:
		return fmt.Errorf("tokenizer: tokenizer.json has no model")
	case m.Type != "BPE" && m.Type != "":
		return &UnsupportedError{Component: where, What: fmt.Sprintf("model type %q (only BPE)", m.Type)}
	case m.Dropout != nil && *m.Dropout != 0:
		return &UnsupportedError{Component: where + ".dropout", What: fmt.Sprint(*m.Dropout)}
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return &UnsupportedError{Component: where + ".continuing_subword_prefix", What: *m.ContinuingSubwordPrefix}
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return &UnsupportedError{Component: where + ".end_of_word_suffix", What: *m.EndOfWordSuffix}
	case m.ByteFallback:
		return &UnsupportedError{Component: where + ".byte_fallback", What: "true (not a byte-level vocabulary)"}
	case len(m.Vocab) == 0:
		return fmt.Errorf("tokenizer: model.vocab is empty")
	}
	t.tokenToID = make(map[string]int32, len(m.Vocab)+64)
	maxID := -1
	for tok, id := range m.Vocab {
		if id < 0 || id > 1<<30 {
			return fmt.Errorf("tokenizer: model.vocab[%q]: id %d out of range", tok, id)
		}
		t.tokenToID[tok] = int32(id)
		maxID = max(maxID, id)
	}
	t.size = maxID + 1

	md := &t.model
	md.ignoreMerges = m.IgnoreMerges
	md.cache = newWordCache()
	for b := range md.byteID {
		md.byteID[b] = -1
		if id, ok := t.tokenToID[string(byteToRune[b])]; ok {
			md.byteID[b] = id
		}
	}
	if md.ignoreMerges {
		md.vocab = make(map[string]int32, len(m.Vocab))
		for tok, id := range m.Vocab {
			if b, ok := byteLevelDecode(tok); ok {
				md.vocab[string(b)] = int32(id)
			}
		}
	}
	md.merges = newMergeTable(len(m.Merges))
	for rank, mg := range m.Merges {
		a, okA := t.tokenToID[mg[0]]
		b, okB := t.tokenToID[mg[1]]
		if !okA || !okB {
			return fmt.Errorf("tokenizer: model.merges[%d] %q: token not in vocab", rank, mg[0]+" "+mg[1])
		}
		c, ok := t.tokenToID[mg[0]+mg[1]]
		if !ok {
			return fmt.Errorf("tokenizer: model.merges[%d] %q: merged token %q not in vocab", rank, mg[0]+" "+mg[1], mg[0]+mg[1])
		}
		// A repeated pair keeps its last rank, as the Rust HashMap insert does.
		md.merges.set(pairKey(a, b), uint64(rank)<<32|uint64(uint32(c)))
	}
	return nil
}

// buildDecode fills dec/decOff from token strings indexed by id ("" = absent).
func (t *BPE) buildDecode(toks []string) {
	t.dec = t.dec[:0]
	t.decOff = make([]uint32, len(toks)+1)
	for id, tok := range toks {
		if tok != "" {
			b, _ := byteLevelDecode(tok)
			t.dec = append(t.dec, b...)
		}
		t.decOff[id+1] = uint32(len(t.dec))
	}
}

// setAdded registers the added tokens the way Hugging Face's
// AddedVocabulary::add_tokens does when it loads a tokenizer.json: the ids
// in the file are not used as given; a token already in the vocabulary takes
// that id, and a new one the next free id after the vocabulary (counted in
// entries) and the added tokens so far. For real files both agree.
func (t *BPE) setAdded(added []AddedToken) error {
	vocabLen := len(t.tokenToID)
	addedIDs := make(map[string]int, len(added))
	maxAdded := -1
	final := make([]AddedToken, 0, len(added))
	for i, a := range added {
		if a.Content == "" {
			return fmt.Errorf("tokenizer: added_tokens[%d]: empty content", i)
		}
		if slices.ContainsFunc(final, func(b AddedToken) bool { b.ID = a.ID; return b == a }) {
			continue
		}
		id, ok := addedIDs[a.Content]
		if !ok {
			if mid, inVocab := t.tokenToID[a.Content]; inVocab {
				id = int(mid)
			} else if maxAdded >= vocabLen {
				id = maxAdded + 1
			} else {
				id = vocabLen
			}
		}
		addedIDs[a.Content] = id
		maxAdded = max(maxAdded, id)
		a.ID = id
		final = append(final, a)
	}
	toks := make([]string, max(t.size, maxAdded+1))
	for tok, id := range t.tokenToID {
		toks[id] = tok
	}
	t.size = len(toks)
	var raw, normed []AddedToken
	t.special = make([]bool, t.size)
	for _, a := range final {
		toks[a.ID] = a.Content
		t.tokenToID[a.Content] = int32(a.ID)
		if a.Special {
			t.special[a.ID] = true
		}
		if a.Normalized {
			if t.nfc {
				a.Content = norm.NFC.String(a.Content)
			}
			normed = append(normed, a)
		} else {
			raw = append(raw, a)
		}
	}
	t.buildDecode(toks)
	t.raw = newAddedMatcher(raw)
	t.normed = newAddedMatcher(normed)
	return nil
}

// Encode returns the ids of text, equal to Hugging Face tokenizers'
// encode(text, add_special_tokens=False).ids: added tokens are matched first
// (unnormalized ones in the raw text, the others after normalization), the
// rest is NFC-normalized when the file says so, pre-tokenized and merged.
// Invalid UTF-8 is encoded byte for byte.
func (t *BPE) Encode(text string) []int {
	return t.AppendEncode(make([]int, 0, len(text)/3+4), text)
}

// AppendEncode appends the ids of text to dst and returns the extended slice.
func (t *BPE) AppendEncode(dst []int, text string) []int {
	t.raw.split(text, func(tok *AddedToken, piece string) {
		if tok != nil {
			dst = append(dst, tok.ID)
			return
		}
		if t.nfc && !isNFC(piece) {
			piece = norm.NFC.String(piece)
		}
		t.normed.split(piece, func(tok *AddedToken, piece string) {
			if tok != nil {
				dst = append(dst, tok.ID)
				return
			}
			dst = t.preTokenize(dst, piece, 0)
		})
	})
	return dst
}

// isNFC is a fast test that s needs no NFC normalization.
func isNFC(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return norm.NFC.QuickSpanString(s[i:]) == len(s)-i
		}
	}
	return true
}

// preTokenize runs pre-tokenizer steps[k:] on piece and encodes the result.
func (t *BPE) preTokenize(dst []int, piece string, k int) []int {
	if piece == "" {
		return dst
	}
	st := &t.steps[k]
	if st.split {
		for i := 0; i < len(piece); {
			j := st.rule.next(piece, i)
			dst = t.preTokenize(dst, piece[i:j], k+1)
			i = j
		}
		return dst
	}
	// ByteLevel, the last step.
	if st.addPrefixSpace && piece[0] != ' ' {
		piece = " " + piece
	}
	if !st.useRegex {
		return t.model.encodeWord(dst, piece)
	}
	for i := 0; i < len(piece); {
		j := ruleGPT2.next(piece, i)
		dst = t.model.encodeWord(dst, piece[i:j])
		i = j
	}
	return dst
}

// EncodeBatch encodes texts in parallel on all cores (GOMAXPROCS workers);
// out[i] is Encode(texts[i]).
func (t *BPE) EncodeBatch(texts []string) [][]int {
	return encodeBatch(t.Encode, texts)
}

func encodeBatch(encode func(string) []int, texts []string) [][]int {
	out := make([][]int, len(texts))
	workers := min(runtime.GOMAXPROCS(0), len(texts))
	if workers <= 1 {
		for i, s := range texts {
			out[i] = encode(s)
		}
		return out
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(texts) {
					return
				}
				out[i] = encode(texts[i])
			}
		})
	}
	wg.Wait()
	return out
}

// TokenBytes returns (a copy of) the bytes token id decodes to: Hugging
// Face's ByteLevel decoder applied to the one token.
func (t *BPE) TokenBytes(id int) ([]byte, bool) {
	return t.appendTokenBytes(nil, id)
}

// appendTokenBytes appends the bytes of token id to dst.
func (t *BPE) appendTokenBytes(dst []byte, id int) ([]byte, bool) {
	if id < 0 || id >= t.size {
		return dst, false
	}
	lo, hi := t.decOff[id], t.decOff[id+1]
	if lo == hi {
		return dst, false
	}
	return append(dst, t.dec[lo:hi]...), true
}

// Decode returns the text of ids, as Hugging Face's decode(ids,
// skip_special_tokens=False): unknown ids are skipped, and the joined bytes
// are made valid UTF-8 the way Rust's String::from_utf8_lossy does.
func (t *BPE) Decode(ids []int) string {
	s, _ := decodeWith(t, ids, false)
	return s
}

// DecodeChecked is Decode that returns an *IDError (wrapping ErrUnknownID)
// for the first id that names no token.
func (t *BPE) DecodeChecked(ids []int) (string, error) {
	return decodeWith(t, ids, true)
}

// VocabSize returns one more than the largest id of the vocabulary and the
// added tokens. (A model's embedding matrix may be larger.)
func (t *BPE) VocabSize() int { return t.size }

// TokenID returns the id of an added token's content or of a vocabulary
// token in its byte-level spelling ("Ġthe" for " the").
func (t *BPE) TokenID(token string) (int, bool) {
	id, ok := t.tokenToID[token]
	return int(id), ok
}

// IsSpecial reports whether id is an added token marked special, the tokens
// Hugging Face's decode(skip_special_tokens=True) leaves out.
func (t *BPE) IsSpecial(id int) bool {
	return id >= 0 && id < len(t.special) && t.special[id]
}

// EOSIDs returns the ids that end generation: tokenizer_config.json's
// eos_token, then generation_config.json's eos_token_id entries. Empty for a
// tokenizer made by FromFile or Parse.
func (t *BPE) EOSIDs() []int { return slices.Clone(t.eos) }

// ChatTemplate returns the Jinja chat template read by Load, or "".
func (t *BPE) ChatTemplate() string { return t.chatTemplate }

// Load reads a checkpoint folder: tokenizer.json (required),
// tokenizer_config.json (chat_template, eos_token, bos_token; optional) and
// generation_config.json (eos_token_id; optional).
func Load(dir string) (*BPE, error) {
	t, err := FromFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	if err := t.readConfig(filepath.Join(dir, "tokenizer_config.json")); err != nil {
		return nil, err
	}
	if err := t.readGenerationConfig(filepath.Join(dir, "generation_config.json")); err != nil {
		return nil, err
	}
	return t, nil
}

// tokenName is a special-token entry of tokenizer_config.json: a string or
// an object with "content".
type tokenName string

func (n *tokenName) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*n = tokenName(s)
		return nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("want a string or {\"content\": ...}: %w", err)
	}
	*n = tokenName(o.Content)
	return nil
}

func (t *BPE) readConfig(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	var c struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		EOS          tokenName       `json:"eos_token"`
		BOS          tokenName       `json:"bos_token"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	if !isNull(c.ChatTemplate) {
		tpl, err := pickTemplate(c.ChatTemplate)
		if err != nil {
			return fmt.Errorf("tokenizer: %s: chat_template: %w", path, err)
		}
		t.chatTemplate = tpl
	}
	t.bosToken, t.eosToken = string(c.BOS), string(c.EOS)
	if c.EOS != "" {
		id, ok := t.TokenID(string(c.EOS))
		if !ok {
			return fmt.Errorf("tokenizer: %s: eos_token %q is not in the vocabulary", path, c.EOS)
		}
		t.eos = append(t.eos, id)
	}
	return nil
}

// pickTemplate returns the chat template: a string, or the "default" entry
// of a list of {"name", "template"} (transformers' multi-template form).
func pickTemplate(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", err
	}
	for _, e := range list {
		if e.Name == "default" {
			return e.Template, nil
		}
	}
	return "", errors.New("no template named \"default\"")
}

func (t *BPE) readGenerationConfig(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	var c struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	if isNull(c.EOS) {
		return nil
	}
	var ids []int
	var one int
	if err := json.Unmarshal(c.EOS, &one); err == nil {
		ids = []int{one}
	} else if err := json.Unmarshal(c.EOS, &ids); err != nil {
		return fmt.Errorf("tokenizer: %s: eos_token_id: %w", path, err)
	}
	for i, id := range ids {
		if _, ok := t.TokenBytes(id); !ok {
			return fmt.Errorf("tokenizer: %s: eos_token_id[%d] = %d names no token", path, i, id)
		}
		if !slices.Contains(t.eos, id) {
			t.eos = append(t.eos, id)
		}
	}
	return nil
}
