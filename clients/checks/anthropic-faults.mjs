// @anthropic-ai/sdk against injected faults (the Go test starts the fake
// with --fault): the SDK's own retries carry the first turn through a 529
// overloaded_error and a 429 rate_limit_error (retry-after-ms honoured); the
// tool round trip then completes; a streamed turn ended by an error event
// after HTTP 200 surfaces as the API error it names.
import Anthropic from '@anthropic-ai/sdk';
import { TASK, anthropicModel, anthropicTool, must, report, textOf, weather } from './lib.mjs';

const client = new Anthropic(); // maxRetries: 2, the SDK's default
const params = { model: anthropicModel, max_tokens: 1024, tools: [anthropicTool] };
const messages = [{ role: 'user', content: TASK }];

const first = await client.messages.create({ ...params, messages });
const uses = first.content.filter((b) => b.type === 'tool_use');
must(uses.length === 1, 'one tool_use after the retries', first);
messages.push({ role: 'assistant', content: first.content });
messages.push({ role: 'user', content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: weather(u.input) })) });
const second = await client.messages.create({ ...params, messages });

let streamError = null;
try {
  await client.messages.stream({ ...params, messages: [{ role: 'user', content: TASK }] }).finalMessage();
} catch (e) {
  streamError = { name: e.constructor.name, status: e.status ?? null, type: e.error?.error?.type ?? null };
}
report({ final_text: textOf(second.content), stream_error: streamError });
