package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
	"time"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// DefaultCacheSize is the number of results a Cache keeps when its
// CacheConfig sets none.
const DefaultCacheSize = 4096

// maxCacheJoins bounds how many times a call joins an identical call in
// flight whose caller left before it ended, before running the tool itself.
const maxCacheJoins = 3

// CacheConfig configures NewCache.
type CacheConfig struct {
	// Size bounds the results kept, the least recently used evicted
	// first; 0 means DefaultCacheSize.
	Size int
	// Failed keeps failed results (Result.Failed) too. Off by default: a
	// failure can be the machine's rather than the code's (a timeout
	// under load, a memory limit), and the next identical call should
	// get its own chance.
	Failed bool
}

// CacheStats counts a Cache's calls.
type CacheStats struct {
	Calls    int64 // calls made
	Hits     int64 // answered from the cache
	Shared   int64 // answered by an identical call that was in flight
	Executed int64 // run on the wrapped tool
}

// Cache wraps a deterministic tool and answers a call from the result of
// an earlier call with the same arguments: a GRPO group's n samples of
// one prompt often make the same call (the same expression, the same
// search query), and an execution in a sandboxed interpreter costs tens
// of milliseconds of CPU where a lookup costs microseconds. Identical
// calls in flight at once run the tool once (singleflight).
//
// Arguments match when they are the same JSON value: key order and
// white space do not matter, numbers are compared as written. Use it only
// for a tool whose result is a function of its arguments; code that reads
// the clock, a random source or the network is not. The model sees the
// same Content, Failed and Reward as from the tool; Duration is the time
// the caller waited, and Metadata["cache"] is "hit" or "shared" when the
// tool did not run for this call. Errors (a tool that cannot work, a
// cancelled context) are never kept.
//
// A tool that keeps state per conversation (Stateful) is refused. A
// Cache is safe for concurrent use when the wrapped tool is.
type Cache struct {
	tool   Tool
	failed bool
	lru    *lru.Cache[string, Result]
	flight singleflight.Group

	mu    sync.Mutex
	stats CacheStats
}

// NewCache wraps t in a cache of cfg.Size results.
func NewCache(t Tool, cfg CacheConfig) (*Cache, error) {
	if t == nil {
		return nil, errors.New("tool: NewCache(nil)")
	}
	if _, ok := t.(Stateful); ok {
		// Its calls run in each conversation's session, and a wrapper
		// would hide that; its results depend on the session's state.
		return nil, fmt.Errorf("tool: NewCache(%s): the tool keeps state per conversation (Stateful), so its results are not a function of its arguments", t.Name())
	}
	if cfg.Size < 0 {
		return nil, fmt.Errorf("tool: CacheConfig.Size %d must not be negative", cfg.Size)
	}
	if cfg.Size == 0 {
		cfg.Size = DefaultCacheSize
	}
	l, err := lru.New[string, Result](cfg.Size)
	if err != nil {
		return nil, fmt.Errorf("tool: cache: %w", err)
	}
	return &Cache{tool: t, failed: cfg.Failed, lru: l}, nil
}

// Name is the wrapped tool's.
func (c *Cache) Name() string { return c.tool.Name() }

// Schema is the wrapped tool's.
func (c *Cache) Schema() json.RawMessage { return c.tool.Schema() }

// Stats returns the counts so far.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *Cache) count(f func(*CacheStats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// Call answers from the cache, from an identical call in flight, or from
// the wrapped tool. Arguments that are not one JSON value go to the tool
// uncached (it reports them).
func (c *Cache) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	start := time.Now()
	c.count(func(s *CacheStats) { s.Calls++ })
	key, ok := cacheKey(args)
	if !ok {
		c.count(func(s *CacheStats) { s.Executed++ })
		return c.tool.Call(ctx, args)
	}
	if r, ok := c.lru.Get(key); ok {
		c.count(func(s *CacheStats) { s.Hits++ })
		return served(r, "hit", start), nil
	}
	for range maxCacheJoins {
		led := false
		ch := c.flight.DoChan(key, func() (any, error) {
			led = true
			return c.run(ctx, args, key)
		})
		var fr singleflight.Result
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case fr = <-ch:
		}
		r, _ := fr.Val.(Result)
		if led {
			if fr.Err != nil {
				return Result{}, fr.Err
			}
			return r, nil
		}
		if fr.Err != nil && isContextErr(fr.Err) && ctx.Err() == nil {
			continue // the caller that ran it left before it ended
		}
		if fr.Err != nil {
			return Result{}, fr.Err
		}
		c.count(func(s *CacheStats) { s.Shared++ })
		return served(r, "shared", start), nil
	}
	return c.run(ctx, args, key)
}

// run calls the tool (unless an identical call has just filled the
// cache) and keeps what it may.
func (c *Cache) run(ctx context.Context, args json.RawMessage, key string) (r Result, err error) {
	defer func() {
		// DoChan runs this on a goroutine of its own, where a panic would
		// end the process; the caller gets it as a tool error instead.
		if p := recover(); p != nil {
			r, err = Result{}, fmt.Errorf("%w: %s: %v", ErrToolPanic, c.tool.Name(), p)
		}
	}()
	if r, ok := c.lru.Get(key); ok {
		c.count(func(s *CacheStats) { s.Hits++ })
		return r, nil
	}
	c.count(func(s *CacheStats) { s.Executed++ })
	r, err = c.tool.Call(ctx, args)
	if err == nil && (!r.Failed || c.failed) {
		c.lru.Add(key, clone(r))
	}
	return r, err
}

// served is a kept result as one caller gets it: its own copies of the
// reward and the metadata, the time it waited, and how it was served.
func served(r Result, how string, start time.Time) Result {
	r = clone(r)
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	r.Metadata["cache"] = how
	r.Duration = time.Since(start)
	return r
}

// clone copies what a caller could change in r: the reward and the
// metadata map (its values are shared).
func clone(r Result) Result {
	if r.Reward != nil {
		v := *r.Reward
		r.Reward = &v
	}
	r.Metadata = maps.Clone(r.Metadata)
	return r
}

// cacheKey is the canonical form of args: the JSON value re-encoded with
// object keys sorted and no white space, numbers as written. ok is false
// for anything that is not exactly one JSON value, and for invalid UTF-8,
// which decoding would replace, making different arguments one key.
func cacheKey(args json.RawMessage) (string, bool) {
	if !utf8.Valid(args) {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
