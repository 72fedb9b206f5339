package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// AddedToken is an entry of tokenizer.json's added_tokens: a string matched
// verbatim in the input before pre-tokenization and always encoded as ID.
type AddedToken struct {
	// ID is the id Hugging Face assigns on loading (see BPE), which for
	// real files is the id written in tokenizer.json.
	ID      int    `json:"id"`
	Content string `json:"content"`
	// SingleWord: match only when not inside a word.
	SingleWord bool `json:"single_word"`
	// LStrip, RStrip: the match swallows white space to its left / right.
	LStrip bool `json:"lstrip"`
	RStrip bool `json:"rstrip"`
	// Normalized: match in the normalized text rather than the raw input.
	Normalized bool `json:"normalized"`
	// Special marks control tokens such as <|im_end|>.
	Special bool `json:"special"`
}

// addedMatcher finds added tokens in a text with leftmost-longest semantics,
// as the Aho-Corasick automaton (MatchKind::LeftmostLongest) of Hugging
// Face's AddedVocabulary does: the match that starts first wins, the longest
// among those starting there, and the search resumes after it.
type addedMatcher struct {
	tokens []AddedToken
	nodes  []trieNode
	first  [256]bool
	// only is the single first byte of all tokens, or -1.
	only int
}

type trieNode struct {
	edges []trieEdge
	token int32 // index into tokens, -1 if no token ends here
}

type trieEdge struct {
	b    byte
	next int32
}

func newAddedMatcher(tokens []AddedToken) *addedMatcher {
	m := &addedMatcher{tokens: tokens, nodes: []trieNode{{token: -1}}, only: -1}
	firsts := 0
	for ti, t := range tokens {
		if t.Content == "" {
			continue
		}
		if !m.first[t.Content[0]] {
			m.first[t.Content[0]] = true
			firsts++
			m.only = int(t.Content[0])
		}
		n := int32(0)
		for i := 0; i < len(t.Content); i++ {
			n = m.child(n, t.Content[i])
		}
		m.nodes[n].token = int32(ti)
	}
	if firsts != 1 {
		m.only = -1
	}
	return m
}

func (m *addedMatcher) child(n int32, b byte) int32 {
	for _, e := range m.nodes[n].edges {
		if e.b == b {
			return e.next
		}
	}
	m.nodes = append(m.nodes, trieNode{token: -1})
	next := int32(len(m.nodes) - 1)
	m.nodes[n].edges = append(m.nodes[n].edges, trieEdge{b, next})
	return next
}

// longestAt returns the token index and end of the longest token starting at
// s[i], or -1.
func (m *addedMatcher) longestAt(s string, i int) (tok, end int) {
	tok, n := -1, int32(0)
	for j := i; j < len(s); j++ {
		next := int32(-1)
		for _, e := range m.nodes[n].edges {
			if e.b == s[j] {
				next = e.next
				break
			}
		}
		if next < 0 {
			break
		}
		n = next
		if t := m.nodes[n].token; t >= 0 {
			tok, end = int(t), j+1
		}
	}
	return tok, end
}

// find returns the next match at or after from, or tok -1.
func (m *addedMatcher) find(s string, from int) (tok, start, end int) {
	for i := from; i < len(s); i++ {
		if m.only >= 0 {
			k := strings.IndexByte(s[i:], byte(m.only))
			if k < 0 {
				break
			}
			i += k
		} else if !m.first[s[i]] {
			continue
		}
		if t, e := m.longestAt(s, i); t >= 0 {
			return t, i, e
		}
	}
	return -1, 0, 0
}

// split calls emit for each piece of s: added tokens (tok non-nil) and the
// text between them, following AddedVocabulary::find_matches in Hugging Face
// tokenizers (src/tokenizer/added_vocabulary.rs), including its single_word,
// lstrip and rstrip rules.
func (m *addedMatcher) split(s string, emit func(tok *AddedToken, piece string)) {
	if m == nil || len(m.tokens) == 0 {
		emit(nil, s)
		return
	}
	offset := 0 // end of the last emitted piece
	for from := 0; from < len(s); {
		ti, start, stop := m.find(s, from)
		if ti < 0 {
			break
		}
		from = stop
		t := &m.tokens[ti]
		if t.SingleWord {
			startSpace := start == 0 || !endsWithWordChar(s[:start])
			stopSpace := stop == len(s) || !startsWithWordChar(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if t.LStrip {
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), offset)
		}
		if t.RStrip {
			stop = len(s) - len(strings.TrimLeftFunc(s[stop:], unicode.IsSpace))
		}
		if start > offset {
			emit(nil, s[offset:start])
		}
		emit(t, s[start:stop])
		// The search resumes after the match itself, not after what rstrip
		// swallowed, exactly as Hugging Face's find_iter loop does.
		offset = stop
	}
	if offset < len(s) {
		emit(nil, s[offset:])
	}
}

// isWordChar is Rust's char::is_alphanumeric plus '_', the word test of
// AddedVocabulary's single_word option.
func isWordChar(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
}

func endsWithWordChar(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordChar(r)
}

func startsWithWordChar(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordChar(r)
}
