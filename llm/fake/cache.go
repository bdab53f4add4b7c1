package fake

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io"
	"sync"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// The prompt-cache simulator.
//
// A prompt is a sequence of prefix elements in the order the providers
// cache them: tool definitions, then system texts, then every message's
// content blocks. Each element carries a hash chained over everything before
// it (so equal hashes mean byte-equal prefixes, model included) and the
// cumulative token count by the package's one counting rule.
//
// Anthropic: elements marked with cache_control are breakpoints. A lookup
// walks back up to cacheLookback elements from each breakpoint for an entry
// a previous request wrote; the longest hit is read. Every breakpoint past
// the hit whose prefix reaches the minimum is written. Entries live 5 minutes
// (or an hour with ttl "1h") on the server's clock, refreshed by each hit.
//
// OpenAI: caching is automatic. Every element boundary of a prompt of at
// least the minimum is written; a lookup finds the longest written prefix
// and reports it rounded down to a multiple of 128 tokens.
//
// Writes become readable only when the response that made them begins
// (after its first-byte latency): requests sent in parallel before that all
// miss, as on the real APIs.

// cacheLookback is how many elements a lookup walks back from a breakpoint.
const cacheLookback = 20

// Cache lifetimes.
const (
	ttl5m  = 5 * time.Minute
	ttl1h  = time.Hour
	ttl24h = 24 * time.Hour
)

// openaiCacheStep is the granularity of OpenAI's cached_tokens.
const openaiCacheStep = 128

type prefixKey [sha256.Size]byte

// prefixElem is one element of a prompt's cacheable prefix.
type prefixElem struct {
	key    prefixKey     // hash of the prefix up to and including this element
	tokens int           // tokens of the prefix up to and including this element
	ttl    time.Duration // breakpoint lifetime; 0 when not a breakpoint
}

// prefixBuilder hashes a prompt element by element.
type prefixBuilder struct {
	h     hash.Hash
	prev  prefixKey
	total int
	elems []prefixElem
	lenb  [binary.MaxVarintLen64]byte
}

// newPrefixBuilder starts a prefix; the model is part of it, since caches
// are per model.
func newPrefixBuilder(model string, capHint int) *prefixBuilder {
	b := &prefixBuilder{h: sha256.New(), elems: make([]prefixElem, 0, capHint)}
	b.begin()
	b.str(model)
	b.h.Sum(b.prev[:0])
	return b
}

// begin starts an element: its hash covers the previous prefix hash.
func (b *prefixBuilder) begin() {
	b.h.Reset()
	b.h.Write(b.prev[:])
}

// str and raw add one length-prefixed part to the element being hashed.
func (b *prefixBuilder) str(s string) {
	n := binary.PutUvarint(b.lenb[:], uint64(len(s)))
	b.h.Write(b.lenb[:n])
	_, _ = io.WriteString(b.h, s)
}

func (b *prefixBuilder) raw(p []byte) {
	n := binary.PutUvarint(b.lenb[:], uint64(len(p)))
	b.h.Write(b.lenb[:n])
	b.h.Write(p)
}

// end finishes the element begun last, costing tokens, with a breakpoint
// lifetime (0 for none).
func (b *prefixBuilder) end(tokens int, ttl time.Duration) {
	b.h.Sum(b.prev[:0])
	b.total += tokens
	b.elems = append(b.elems, prefixElem{key: b.prev, tokens: b.total, ttl: ttl})
}

// markLast makes the last element a breakpoint (Anthropic's top-level
// automatic cache_control) unless it already is one.
func (b *prefixBuilder) markLast(ttl time.Duration) {
	if n := len(b.elems); n > 0 && b.elems[n-1].ttl == 0 {
		b.elems[n-1].ttl = ttl
	}
}

// cacheUsage is how a prompt's input tokens divide under the simulator.
type cacheUsage struct {
	Input, Read, Write5m, Write1h int
}

// Write is all tokens written to the cache.
func (u cacheUsage) Write() int { return u.Write5m + u.Write1h }

type cacheEntry struct {
	expires time.Time
	ttl     time.Duration
}

type cacheWrite struct {
	key prefixKey
	ttl time.Duration
}

// cachePlan is a lookup's result and the writes to publish when the
// response begins.
type cachePlan struct {
	usage  cacheUsage
	writes []cacheWrite
}

// promptCache is the simulator's store, shared by every request a server
// answers.
type promptCache struct {
	clock     clock.Clock
	min       int
	mu        sync.Mutex
	entries   map[prefixKey]cacheEntry
	sweepSize int
}

func newPromptCache(c clock.Clock, min int) *promptCache {
	return &promptCache{clock: c, min: min, entries: make(map[prefixKey]cacheEntry), sweepSize: 1024}
}

// liveLocked returns whether key holds an unexpired entry, refreshing it
// when refresh is set.
func (c *promptCache) liveLocked(key prefixKey, now time.Time, refresh bool) bool {
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		return false
	}
	if refresh {
		e.expires = now.Add(e.ttl)
		c.entries[key] = e
	}
	return true
}

// planAnthropic looks elems up with explicit breakpoints.
func (c *promptCache) planAnthropic(elems []prefixElem) cachePlan {
	total := 0
	if len(elems) > 0 {
		total = elems[len(elems)-1].tokens
	}
	now := c.clock.Now()
	c.mu.Lock()
	hit := -1
	for i := range elems {
		if elems[i].ttl == 0 {
			continue
		}
		for j := i; j >= 0 && j > i-cacheLookback && j > hit; j-- {
			if elems[j].tokens >= c.min && c.liveLocked(elems[j].key, now, false) {
				hit = j
				break
			}
		}
	}
	if hit >= 0 {
		c.liveLocked(elems[hit].key, now, true)
	}
	c.mu.Unlock()

	var p cachePlan
	boundary := 0
	if hit >= 0 {
		p.usage.Read = elems[hit].tokens
		boundary = elems[hit].tokens
	}
	for i := hit + 1; i < len(elems); i++ {
		e := &elems[i]
		if e.ttl == 0 || e.tokens < c.min {
			continue
		}
		if e.ttl >= ttl1h {
			p.usage.Write1h += e.tokens - boundary
		} else {
			p.usage.Write5m += e.tokens - boundary
		}
		boundary = e.tokens
		p.writes = append(p.writes, cacheWrite{key: e.key, ttl: e.ttl})
	}
	p.usage.Input = total - p.usage.Read - p.usage.Write()
	return p
}

// planOpenAI looks elems up as OpenAI's automatic caching does; retention
// is the entries' lifetime.
func (c *promptCache) planOpenAI(elems []prefixElem, retention time.Duration) cachePlan {
	var p cachePlan
	if len(elems) == 0 {
		return p
	}
	total := elems[len(elems)-1].tokens
	p.usage.Input = total
	if total < c.min {
		return p
	}
	now := c.clock.Now()
	hit := -1
	c.mu.Lock()
	for j := len(elems) - 1; j >= 0 && elems[j].tokens >= c.min; j-- {
		if c.liveLocked(elems[j].key, now, true) {
			hit = j
			break
		}
	}
	c.mu.Unlock()
	if hit >= 0 {
		p.usage.Read = elems[hit].tokens / openaiCacheStep * openaiCacheStep
	}
	for j := hit + 1; j < len(elems); j++ {
		if elems[j].tokens >= c.min {
			p.writes = append(p.writes, cacheWrite{key: elems[j].key, ttl: retention})
		}
	}
	p.usage.Input = total - p.usage.Read
	return p
}

// publish makes a plan's writes readable; called when the response that
// made them begins.
func (c *promptCache) publish(p *cachePlan) {
	if len(p.writes) == 0 {
		return
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range p.writes {
		exp := now.Add(w.ttl)
		if e, ok := c.entries[w.key]; ok && e.expires.After(exp) {
			continue
		}
		c.entries[w.key] = cacheEntry{expires: exp, ttl: w.ttl}
	}
	if len(c.entries) >= c.sweepSize {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		c.sweepSize = max(1024, 2*len(c.entries))
	}
}
