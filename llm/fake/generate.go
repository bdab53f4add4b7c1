package fake

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"
	"unicode/utf8"

	"github.com/deputy-run/deputy/llm"
)

// generation is a decided answer to one numbered request, ready to encode
// on either wire.
type generation struct {
	content  []llm.Block
	stop     llm.StopReason
	stopSeq  string
	usage    cacheUsage
	output   int // output tokens
	plan     *cachePlan
	fault    *Fault // body-level fault, or nil
	first    time.Duration
	perToken time.Duration
	rng      *rand.Rand // delta sizes
	maxDelta int
}

// generate numbers the request, applies a server fault or asks the
// Responder, and settles content, stop reason and usage. plan runs the
// prompt-cache lookup (at arrival, so requests racing an unstarted write
// miss). On false the exchange has been answered with an error.
func (s *Server) generate(ex *exchange, req *llm.Request, lim wireLimits, stream bool, toolIDPrefix string, plan func() cachePlan) (*generation, bool) {
	n := ex.number()
	fault := s.pickFault(n)
	if werr, ok := statusFault(fault, stream); ok {
		ex.entry.Fault = fault
		ex.fail(werr)
		return nil, false
	}
	reply, err := s.respond(req, RequestInfo{Provider: ex.entry.Provider, N: n})
	if err != nil {
		ex.fail(internalErr(err))
		return nil, false
	}
	if fault == nil && reply.Fault != nil {
		f := *reply.Fault
		fault = &f
	}
	ex.entry.Fault = fault
	if werr, ok := statusFault(fault, stream); ok {
		ex.fail(werr)
		return nil, false
	}
	g := &generation{fault: fault, maxDelta: s.maxDelta}
	if err := s.settleContent(g, &reply, lim, toolIDPrefix); err != nil {
		ex.fail(internalErr(err))
		return nil, false
	}
	g.output = llm.EstimateOutput(g.content)
	if reply.Usage != nil {
		u := reply.Usage
		g.usage = cacheUsage{Input: int(u.InputTokens), Read: int(u.CacheReadTokens), Write5m: int(u.CacheWriteTokens)}
		g.output = int(u.OutputTokens)
	} else {
		p := plan()
		g.plan = &p
		g.usage = p.usage
	}
	g.first, g.perToken = s.latency(&reply, fault)
	g.rng = rand.New(rand.NewPCG(s.opts.Seed^0x63687566, uint64(n)))
	return g, true
}

// respond calls the Responder, turning a panic into an error so one bad
// scenario fails its request instead of the server.
func (s *Server) respond(req *llm.Request, info RequestInfo) (r Reply, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("fake: responder panicked on request %d: %v", info.N, p)
		}
	}()
	return s.responder.Respond(req, info), nil
}

// settleContent validates the reply's blocks, fills missing tool IDs, and
// ends the answer (endAnswer): a stop sequence in the text, unless the
// Responder pinned a stop reason, and the max_tokens limit, always, end the
// content early, as on the real APIs.
func (s *Server) settleContent(g *generation, r *Reply, lim wireLimits, toolIDPrefix string) error {
	content := make([]llm.Block, 0, len(r.Content))
	for i, b := range r.Content {
		switch b.Type {
		case llm.TypeText:
			if !utf8.ValidString(b.Text) {
				return fmt.Errorf("fake: reply block %d: text is not valid UTF-8", i)
			}
		case llm.TypeToolUse:
			if b.Name == "" {
				return fmt.Errorf("fake: reply block %d: tool_use without a name", i)
			}
			switch {
			case b.InvalidInput != "":
				// Arguments that are not a JSON object, on purpose: a
				// scenario's raw_input. They go out as they are.
				if len(b.Input) > 0 {
					return fmt.Errorf("fake: reply block %d: tool_use has both input and invalid input", i)
				}
				if !utf8.ValidString(b.InvalidInput) {
					return fmt.Errorf("fake: reply block %d: tool_use invalid input is not valid UTF-8", i)
				}
			case len(b.Input) == 0:
				b.Input = json.RawMessage(`{}`)
			}
			if b.InvalidInput == "" && (!json.Valid(b.Input) || !utf8.Valid(b.Input) || firstNonSpace(b.Input) != '{') {
				return fmt.Errorf("fake: reply block %d: tool_use input is not a JSON object: %.80q", i, b.Input)
			}
			if b.ID == "" {
				b.ID = s.newToolID(toolIDPrefix)
			}
		case "":
			return fmt.Errorf("fake: reply block %d has no type", i)
		default:
			if !json.Valid(b.Raw) || firstNonSpace(b.Raw) != '{' {
				return fmt.Errorf("fake: reply block %d (%s): raw is not a JSON object", i, b.Type)
			}
		}
		content = append(content, b)
	}
	g.content, g.stop, g.stopSeq = endAnswer(content, r.StopReason, lim)
	return nil
}

// newToolID makes a tool call ID in the wire's style.
func (s *Server) newToolID(prefix string) string {
	if prefix == "call_" {
		return s.newID(prefix, 24)
	}
	return s.newID(prefix, 22)
}

func firstNonSpace(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// textPieces cuts s into deltas of 1..max runes, never inside a UTF-8
// sequence (a JSON string must stay valid UTF-8).
func (g *generation) textPieces(s string) []string {
	var out []string
	for len(s) > 0 {
		k := 1 + g.rng.IntN(g.maxDelta)
		i := 0
		for r := 0; r < k && i < len(s); r++ {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// jsonPieces cuts raw JSON into fragments of 1..max bytes at arbitrary
// points: inside keys, strings, numbers and escapes, as the APIs stream tool
// input. Only a multi-byte character is kept whole, since each fragment
// travels as a JSON string, which cannot hold half a character.
func (g *generation) jsonPieces(b string) []string {
	var out []string
	for len(b) > 0 {
		k := min(1+g.rng.IntN(g.maxDelta), len(b))
		for k < len(b) && !utf8.RuneStart(b[k]) {
			k++
		}
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}

// pacer spreads a block's per-token latency over its deltas: once sent of
// length bytes have gone out, ceil(cost*sent/length) tokens are paid for, so
// the whole block pays exactly its output tokens (cost) however it is cut.
type pacer struct {
	cost, length, sent, paid int
}

func newPacer(cost, length int) *pacer { return &pacer{cost: cost, length: length} }

// next returns how many tokens a delta of n more bytes pays for.
func (p *pacer) next(n int) int {
	p.sent += n
	target := p.cost
	if p.length > 0 && p.sent < p.length {
		target = (p.cost*p.sent + p.length - 1) / p.length
	}
	d := target - p.paid
	p.paid = target
	return d
}
