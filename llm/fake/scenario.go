package fake

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/deputy-run/deputy/llm"
)

// Scenario is a scripted model's behaviour, loaded from YAML. It implements
// Responder and is safe for concurrent use. The format (docs/scenarios.md has
// the long version with examples):
//
//	name: demo                # optional; defaults to the file's base name
//	description: ...          # optional, ignored
//	seed: 42                  # drives tool-use IDs and fault rates
//	latency: {first_byte: 200ms, per_token: 5ms}   # default for every reply
//	faults:                   # scenario-wide injected failures
//	  - {kind: rate_limit, rate: 0.1, retry_after: 1s}   # ~10% of requests
//	  - {kind: overloaded, on_request: [3, 5]}           # exactly requests 3 and 5
//	rules:                    # the first rule whose match matches answers
//	  - name: plan            # optional label
//	    match:                # all conditions optional and ANDed
//	      system: "reviewer"  # regexp on the system prompt
//	      last_user: "(?i)fix" # regexp on the last user message's text
//	      tool_result: "ok"   # regexp on any tool_result in the last user message
//	      tool_error: true    # the last user message holds an error tool_result
//	      turn: 1             # or "2-4", or "3-": turn = assistant messages + 1
//	      tools: [glob, bash] # these tools must be offered
//	      model: "^claude"    # regexp on the model name
//	    times: 2              # answer at most twice, then fall through
//	    text: "Looking at {{.Task}}"      # a text block (a template)
//	    thinking: "hmm"       # an opaque thinking block with a signature
//	    tool_calls:
//	      - name: spawn_subagent
//	        repeat: 5         # five calls; .I is 1..5, .N is 5
//	        input: {task: "part {{.I}} of {{.N}}"}  # JSON object, keys in this order
//	      - name: bash
//	        raw_input: '{"command": "echo hi"'  # the arguments text as sent, JSON or not
//	    stop_reason: end_turn # default: tool_use with tool calls, else end_turn
//	    usage: {input_tokens: 10, output_tokens: 5, cache_read_tokens: 0, cache_write_tokens: 0}
//	    latency: {first_byte: 1s}          # overrides the default per field
//	    fault: {kind: cut_stream, after_bytes: 100, retry_after: 2s, delay: 1s}
//	default:                  # answers when no rule matches (same reply fields)
//	  text: "I have nothing scripted for turn {{.Turn}}."
//	x-shared: &shared {path: notes.md}  # x- keys are ignored: a home for anchors
//
// Fault kinds: rate_limit, overloaded, server_error, slow_first_byte (waits
// delay more), cut_stream and error_event (break after after_bytes),
// malformed_json.
//
// Strings in text, thinking and tool-input values are templates in
// text/template's language (executed by template_eval.go) over TemplateData
// (.Turn .Task .LastUser .ToolResults .I .N .Model, and .Result "tool") with
// the functions lorem N, truncate N s, json v, lines s, grep re s, find re s
// (the first match), hasPrefix p s and add a b, and some of text/template's
// builtins (template_builtins.go). Everything is checked and compiled at
// load: an unknown field, an unsupported builtin, a bad regexp, template,
// duration or fault kind is an error naming the file and line. Strings
// without "{{" and tool inputs without templates are stored ready-made, so
// answering a simple rule costs a few allocations.
//
// A rule's times counter belongs to the Scenario: everything answering from
// one Scenario shares it. Load a fresh Scenario for an independent run.
type Scenario struct {
	name    string
	file    string
	seed    int64
	latency latency
	faults  []faultRule
	rules   []*rule
	def     *reply
}

// DefaultText answers a request no rule matches when the scenario has no
// default, and every request when there is no scenario at all.
const DefaultText = "This is deputy's fake model; no scenario rule matched this request."

// latency is a reply's delays; has* say which fields a rule set, so a rule
// can override one field of the scenario's default and keep the other.
type latency struct {
	firstByte, perToken       time.Duration
	hasFirstByte, hasPerToken bool
}

// faultRule is a scenario-wide fault: on the listed request numbers, and on
// a seeded pseudo-random fraction rate of all requests.
type faultRule struct {
	fault     Fault
	rate      float64
	onRequest []int
}

// rule is one compiled entry of rules.
type rule struct {
	match matcher
	times int64 // 0: unlimited
	used  atomic.Int64
	reply reply
}

// reply is a compiled set of reply fields.
type reply struct {
	thinking *tmpl
	text     *tmpl
	calls    []toolCall
	// blocks is how many content blocks the reply has at most, to size
	// the Content slice once.
	blocks     int
	stopReason llm.StopReason
	usage      *llm.Usage
	latency    latency
	fault      *Fault
	// thinkingRaw is the ready-made block when thinking is static.
	thinkingRaw []byte
}

// toolCall is a compiled entry of tool_calls.
type toolCall struct {
	name  string
	input jsonTmpl
	// raw, when set (raw_input), is the call's arguments as text sent as
	// they are, JSON or not; input is then unused.
	raw    *tmpl
	repeat int
}

// ParseScenario compiles a scenario from YAML. filename is used in error
// messages only; errors are *ScenarioError values carrying file and line.
func ParseScenario(data []byte, filename string) (*Scenario, error) {
	if filename == "" {
		filename = "scenario"
	}
	return decodeScenario(data, filename)
}

// LoadScenario reads and compiles a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load scenario: %w", err)
	}
	return ParseScenario(data, path)
}

// Name is the scenario's name: its name field, or the file's base name.
func (s *Scenario) Name() string {
	if s == nil {
		return ""
	}
	return s.name
}

// Respond answers one request: the first matching rule's reply, the default,
// or DefaultText. A nil Scenario answers DefaultText. Scenario-wide faults
// are decided first; a request they fail still gets the content its rule
// would give (a cut stream needs something to cut) but does not use up the
// rule's times, so the client's retry gets the same answer. StopReason is
// empty unless the rule sets stop_reason; the server or scripted model
// playing the reply decides it from the request's limits.
func (s *Scenario) Respond(req *llm.Request, info RequestInfo) Reply {
	rep, _ := s.respond(req, info)
	return rep
}

// respond is Respond that also returns the compiled reply, whose ready-made
// strings the scripted model streams without converting bytes.
func (s *Scenario) respond(req *llm.Request, info RequestInfo) (Reply, *reply) {
	if req == nil {
		req = &llm.Request{}
	}
	if s == nil {
		return Reply{Content: []llm.Block{llm.Text(DefaultText)}}, nil
	}
	st := newReqState(req, info, s.seed)
	var fault *Fault
	for i := range s.faults {
		if s.faults[i].fires(s.seed, info.N, i) {
			f := s.faults[i].fault
			fault = &f
			break
		}
	}
	r := s.pick(&st, fault == nil)
	var out Reply
	if r == nil {
		out = Reply{Content: []llm.Block{llm.Text(DefaultText)}}
	} else {
		out = r.build(&st)
	}
	lat := s.latency
	if r != nil {
		if r.latency.hasFirstByte {
			lat.firstByte = r.latency.firstByte
		}
		if r.latency.hasPerToken {
			lat.perToken = r.latency.perToken
		}
	}
	out.FirstByte, out.PerToken = lat.firstByte, lat.perToken
	if fault != nil {
		out.Fault = fault
	}
	return out, r
}

// pick returns the first rule whose match matches, else the default (nil
// when there is none). consume false looks without using up times.
func (s *Scenario) pick(st *reqState, consume bool) *reply {
	for _, r := range s.rules {
		if !r.match.matches(st) {
			continue
		}
		if r.times > 0 {
			if consume {
				// Add before compare: concurrent requests each get a
				// distinct count, so exactly times of them win.
				if r.used.Add(1) > r.times {
					continue
				}
			} else if r.used.Load() >= r.times {
				continue
			}
		}
		return &r.reply
	}
	return s.def
}

// build renders the reply for one request.
func (r *reply) build(st *reqState) Reply {
	content := make([]llm.Block, 0, r.blocks)
	if r.thinking != nil {
		raw := r.thinkingRaw
		if raw == nil {
			raw = thinkingBlock(r.thinking.render(st.templateData(0, 0)))
		}
		content = append(content, llm.Opaque("thinking", raw))
	}
	if r.text != nil {
		var t string
		if r.text.isStatic() {
			t = r.text.static
		} else {
			t = r.text.render(st.templateData(0, 0))
		}
		// A real API never returns an empty text block, and refuses one
		// sent back, so a template rendering nothing yields no block.
		if t != "" {
			content = append(content, llm.Text(t))
		}
	}
	for i := range r.calls {
		c := &r.calls[i]
		for k := 1; k <= c.repeat; k++ {
			if c.raw != nil {
				// llm.ToolCall sorts the text as the client will: an
				// object is Input, anything else InvalidInput.
				content = append(content, llm.ToolCall(st.toolID(len(content)), c.name, []byte(c.raw.render(st.templateData(k, c.repeat)))))
				continue
			}
			var input []byte
			if c.input.static != nil {
				input = c.input.static
			} else {
				input = c.input.render(st.templateData(k, c.repeat))
			}
			content = append(content, llm.ToolUse(st.toolID(len(content)), c.name, input))
		}
	}
	// A stop reason the rule does not pin stays empty: the server and the
	// scripted model decide it (endAnswer), after cutting at the request's
	// stop sequences and max_tokens, which a pinned reason would turn off.
	out := Reply{Content: content, StopReason: r.stopReason}
	if r.usage != nil {
		u := *r.usage
		out.Usage = &u
	}
	if r.fault != nil {
		f := *r.fault
		out.Fault = &f
	}
	return out
}

// staticInput returns the ready-made string of a tool input when input is
// one of the reply's shared static inputs, so streaming it needs no
// []byte-to-string copy.
func (r *reply) staticInput(input []byte) (string, bool) {
	if r == nil || len(input) == 0 {
		return "", false
	}
	for i := range r.calls {
		s := r.calls[i].input.static
		if len(s) == len(input) && &s[0] == &input[0] {
			return r.calls[i].input.staticStr, true
		}
	}
	return "", false
}

// fires decides deterministically whether the fault hits request n.
func (f *faultRule) fires(seed int64, n, index int) bool {
	for _, k := range f.onRequest {
		if k == n {
			return true
		}
	}
	if f.rate <= 0 {
		return false
	}
	x := mix64(uint64(seed) ^ mix64(uint64(n)<<8|uint64(index&0xff)))
	return float64(x>>11)/(1<<53) < f.rate
}

// ThinkingSignature is the signature the fake gives a thinking block with
// this text: a sealed token that carries the text (thinkingSeal,
// thinking_sig.go), so the fake server can tell a block sent back with its
// text changed (refused, as the real API refuses it) from one whose text
// was omitted (display "omitted": accepted, the signature carries the
// thinking).
func ThinkingSignature(thinking string) string { return thinkingSeal.seal(thinking) }

// thinkingBlock is the raw JSON of a thinking block, in Anthropic's shape,
// signed (ThinkingSignature, thinking_sig.go).
func thinkingBlock(text string) []byte {
	b := make([]byte, 0, len(text)+100)
	b = append(b, `{"type":"thinking","thinking":`...)
	b = appendJSONString(b, text)
	b = append(b, `,"signature":`...)
	b = appendJSONString(b, ThinkingSignature(text))
	return append(b, '}')
}

// mix64 is the splitmix64 finalizer: a cheap, well-spread hash step.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
