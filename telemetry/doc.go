// Package telemetry turns deputy's event stream (agent.Event, with the
// loop's events inside) into OpenTelemetry spans after the GenAI semantic
// conventions, exported over OTLP/HTTP. It is off unless
// OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set or deputy.yaml
// enables it (Setup); a disabled Tracer does nothing.
//
// Spans:
//
//   - invoke_agent {type}, one per run of an instance, from the moment a
//     child is listed (EventCreated: its wait for a slot is inside, marked by
//     a deputy.queued event, its start by deputy.started) or a root starts,
//     to its end (EventEnded, or a run that stops to wait). It carries
//     gen_ai.agent.name/id, deputy.instance.id, deputy.root.id, the model,
//     and at its end the state, stop reason, turns and the instance's own
//     usage (the usage of a child's report-shortening call included, which
//     has no chat span: that call emits no events). Failed, timed-out and
//     cancelled instances have an error status, error.type the state.
//   - chat {model} (CLIENT), one per model call, from turn_started to
//     model_response: gen_ai.usage.* (input_tokens is the whole prompt,
//     cache reads and writes included, as the conventions count it; deputy's
//     own InputTokens is the uncached part), finish reasons, each HTTP
//     attempt as a deputy.attempt event. A call that fails has an error
//     status, error.type the last attempt's reason. A compaction's summary
//     call is a chat span of its own with deputy.purpose=compact.
//   - execute_tool {name}, one per tool call, from tool_call to
//     tool_result; a result marked as an error sets an error status. The
//     loop emits a turn's calls before the batch runs and the results after
//     it, so a tool span covers its batch, not only its own call.
//
// The tree: a chat or execute_tool span's parent is its instance's
// invoke_agent span. A child's invoke_agent span's parent is the parent's
// execute_tool span of the spawn_subagent (or fan_out) call that started
// it, so the trace shows which call made which child and the call's span
// covers the child's work; when the call cannot be told (events do not name
// it: see inst.claim), the parent's invoke_agent span.
//
// One trace per tree, across processes: a root span's trace id is derived
// from the root instance's id (TraceID), through a custom IDGenerator rather
// than a made-up remote parent, so no span points at a parent that was
// never exported. A root resumed by a worker after a crash, an answer or a
// pause lands in the same trace as its first run, each run an invoke_agent
// span of its own; a child's later run built from the store (its parent not
// running here) is a root span of that trace, found through Options.Lookup.
// Span ids are random: a replayed step after a crash is another execution,
// and its spans appear again.
//
// Content: tasks, prompts (gen_ai.input.messages), answers
// (gen_ai.output.messages), tool arguments and results
// (gen_ai.tool.call.arguments/result) and a failed tool's error text are
// recorded only when opted in (Options.Content, deputy.yaml
// telemetry.content, or OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true).
// A chat span's input is what that call added to the conversation (the
// task, tool results, notes), not the whole history again, which would
// make a trace quadratic in its length; the history is the chain of the
// instance's chat spans, and the store has the transcript.
//
// Timestamps come from Options.Clock, so tests are deterministic. Events
// arrive from many goroutines: each instance has its own lock, the map of
// open instances another; an instance's spans all end when it ends (or its
// run stops to wait), and Close ends whatever is still open when the
// process stops, marked deputy.interrupted.
package telemetry
