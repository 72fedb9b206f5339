package tokenizer

import (
	"hash/maphash"
	"sync/atomic"
)

// bpeModel is a byte-level BPE model: merges are looked up on token ids, and
// a word (one pre-tokenized piece) starts as one symbol per byte.
type bpeModel struct {
	// byteID maps a byte to its single-byte token, -1 if the vocabulary
	// lacks it (such bytes are dropped, as Hugging Face does without an
	// unk_token).
	byteID [256]int32
	// merges maps the pair (left<<32 | right) to (rank<<32 | merged id).
	merges *mergeTable
	// vocab maps a token's raw bytes to its id, for ignore_merges.
	vocab map[string]int32
	// ignoreMerges: a word found whole in the vocabulary is one token
	// (tokenizer.json model.ignore_merges, set by Llama 3).
	ignoreMerges bool
	cache        *wordCache
}

// lookup returns the rank and result of merging the pair (a, b).
func (m *bpeModel) lookup(a, b int32) (rank, id int32, ok bool) {
	v, ok := m.merges.get(pairKey(a, b))
	return int32(v >> 32), int32(uint32(v)), ok
}

// naiveLimit is the word length (in bytes) up to which the quadratic merge
// loop beats the heap: for short words a linear scan of a few ranks is cheaper
// than heap bookkeeping.
const naiveLimit = 48

// encodeWord appends the tokens of one pre-tokenized piece to dst.
func (m *bpeModel) encodeWord(dst []int, word string) []int {
	if len(word) == 1 {
		if id := m.byteID[word[0]]; id >= 0 {
			dst = append(dst, int(id))
		}
		return dst
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			return append(dst, int(id))
		}
	}
	if ids, ok := m.cache.get(word); ok {
		for _, id := range ids {
			dst = append(dst, int(id))
		}
		return dst
	}
	var buf [naiveLimit]int32
	var ids []int32
	if len(word) <= naiveLimit {
		ids = m.mergeNaive(buf[:0], word)
	} else {
		ids = m.mergeHeap(word)
	}
	for _, id := range ids {
		dst = append(dst, int(id))
	}
	m.cache.put(word, ids)
	return dst
}

// mergeNaive applies merges by repeatedly merging the adjacent pair of lowest
// rank, leftmost first, which is the order Hugging Face's priority queue
// (tokenizers/src/models/bpe/word.rs, Word::merge_all) produces.
func (m *bpeModel) mergeNaive(syms []int32, word string) []int32 {
	for i := 0; i < len(word); i++ {
		if id := m.byteID[word[i]]; id >= 0 {
			syms = append(syms, id)
		}
	}
	if len(syms) < 2 {
		return syms
	}
	// ranks[i] is the rank of merging syms[i] and syms[i+1] (or noMerge),
	// res[i] the resulting token.
	const noMerge = int32(1<<31 - 1)
	var rankBuf, resBuf [naiveLimit]int32
	ranks, res := rankBuf[:len(syms)-1], resBuf[:len(syms)-1]
	for i := range ranks {
		ranks[i], res[i] = noMerge, 0
		if r, id, ok := m.lookup(syms[i], syms[i+1]); ok {
			ranks[i], res[i] = r, id
		}
	}
	for len(syms) > 1 {
		best, bi := noMerge, -1
		for i, r := range ranks {
			if r < best {
				best, bi = r, i
			}
		}
		if bi < 0 {
			break
		}
		syms[bi] = res[bi]
		copy(syms[bi+1:], syms[bi+2:])
		syms = syms[:len(syms)-1]
		copy(ranks[bi:], ranks[bi+1:])
		copy(res[bi:], res[bi+1:])
		ranks, res = ranks[:len(ranks)-1], res[:len(res)-1]
		if bi > 0 {
			ranks[bi-1], res[bi-1] = noMerge, 0
			if r, id, ok := m.lookup(syms[bi-1], syms[bi]); ok {
				ranks[bi-1], res[bi-1] = r, id
			}
		}
		if bi < len(ranks) {
			ranks[bi], res[bi] = noMerge, 0
			if r, id, ok := m.lookup(syms[bi], syms[bi+1]); ok {
				ranks[bi], res[bi] = r, id
			}
		}
	}
	return syms
}

// mergeHeap is the same merge order for long words, in O(n log n): symbols
// form a doubly linked list, candidate merges sit in a min-heap ordered by
// (rank, position), and stale candidates are skipped when popped.
func (m *bpeModel) mergeHeap(word string) []int32 {
	n := 0
	id := make([]int32, 0, len(word))
	for i := 0; i < len(word); i++ {
		if t := m.byteID[word[i]]; t >= 0 {
			id = append(id, t)
		}
	}
	n = len(id)
	if n < 2 {
		return id
	}
	prev := make([]int32, n)
	next := make([]int32, n)
	alive := make([]bool, n)
	for i := range n {
		prev[i], next[i], alive[i] = int32(i-1), int32(i+1), true
	}
	next[n-1] = -1
	h := make(mergeHeap, 0, n)
	for i := 0; i+1 < n; i++ {
		if r, res, ok := m.lookup(id[i], id[i+1]); ok {
			h.push(candidate{rank: r, pos: int32(i), left: id[i], right: id[i+1], res: res})
		}
	}
	for len(h) > 0 {
		c := h.pop()
		p := c.pos
		q := next[p]
		// Stale: the left symbol was merged away or changed, or its right
		// neighbour is no longer the one this candidate was made for.
		if !alive[p] || q < 0 || id[p] != c.left || id[q] != c.right {
			continue
		}
		id[p] = c.res
		alive[q] = false
		next[p] = next[q]
		if next[q] >= 0 {
			prev[next[q]] = p
		}
		if l := prev[p]; l >= 0 {
			if r, res, ok := m.lookup(id[l], id[p]); ok {
				h.push(candidate{rank: r, pos: l, left: id[l], right: id[p], res: res})
			}
		}
		if r := next[p]; r >= 0 {
			if rk, res, ok := m.lookup(id[p], id[r]); ok {
				h.push(candidate{rank: rk, pos: p, left: id[p], right: id[r], res: res})
			}
		}
	}
	out := id[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, id[i])
	}
	return out
}

// candidate is a possible merge of the symbol at pos with its right neighbour.
type candidate struct {
	rank, pos, left, right, res int32
}

// mergeHeap is a binary min-heap of candidates by (rank, pos), written out
// to avoid container/heap's interface conversions on the hot path.
type mergeHeap []candidate

func (h mergeHeap) less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}

func (h *mergeHeap) push(c candidate) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeHeap) pop() candidate {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, small := 2*i+1, 2*i+2, i
		if l < len(s) && s.less(l, small) {
			small = l
		}
		if r < len(s) && s.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
	return top
}

// wordCache remembers the tokens of recently seen words, like Hugging Face's
// BPE cache. It is a two-way set-associative table of atomically swapped
// entries: a lookup is one hash and at most two string compares, with no
// lock for EncodeBatch's goroutines to contend on, and a new word replaces
// an entry of its set, which bounds the memory.
type wordCache struct {
	seed  maphash.Seed
	slots []atomic.Pointer[cacheEntry]
}

type cacheEntry struct {
	word string
	ids  []int32
}

const (
	cacheSlots   = 1 << 17
	cacheMaxWord = 256 // longer words are not cached
)

func newWordCache() *wordCache {
	return &wordCache{seed: maphash.MakeSeed(), slots: make([]atomic.Pointer[cacheEntry], cacheSlots)}
}

// set returns the two slots a word may occupy.
func (c *wordCache) set(word string) []atomic.Pointer[cacheEntry] {
	i := maphash.String(c.seed, word) & (cacheSlots - 2)
	return c.slots[i : i+2 : i+2]
}

func (c *wordCache) get(word string) ([]int32, bool) {
	if c == nil || len(word) > cacheMaxWord {
		return nil, false
	}
	set := c.set(word)
	for i := range set {
		if e := set[i].Load(); e != nil && e.word == word {
			return e.ids, true
		}
	}
	return nil, false
}

func (c *wordCache) put(word string, ids []int32) {
	if c == nil || len(word) > cacheMaxWord {
		return
	}
	// Copy the word so as not to pin the caller's text in memory.
	e := &cacheEntry{word: string([]byte(word)), ids: append([]int32(nil), ids...)}
	set := c.set(word)
	if set[0].Load() == nil {
		set[0].Store(e)
		return
	}
	// Keep the newer of the two: the older entry moves out.
	set[1].Store(set[0].Load())
	set[0].Store(e)
}
