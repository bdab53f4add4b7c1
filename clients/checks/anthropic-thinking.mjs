// @anthropic-ai/sdk with extended thinking and a tool, streamed: the
// thinking block (with its signature) goes back unchanged beside the
// tool_result, as the Messages API requires for a tool turn.
import Anthropic from '@anthropic-ai/sdk';
import { TASK, anthropicModel, anthropicTool, must, report, textOf, weather } from './lib.mjs';

const client = new Anthropic();
const params = {
  model: anthropicModel, max_tokens: 4096, tools: [anthropicTool], thinking: { type: 'enabled', budget_tokens: 2048 },
};
const messages = [{ role: 'user', content: TASK }];

let thinkingDeltas = '';
const stream = client.messages.stream({ ...params, messages });
stream.on('thinking', (d) => { thinkingDeltas += d; });
const first = await stream.finalMessage();
const thinking = first.content.filter((b) => b.type === 'thinking');
const uses = first.content.filter((b) => b.type === 'tool_use');
must(thinking.length === 1 && thinking[0].signature && uses.length === 1, 'a signed thinking block, then a tool_use', first);
messages.push({ role: 'assistant', content: first.content });
messages.push({
  role: 'user',
  content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: weather(u.input) })),
});
const second = await client.messages.create({ ...params, messages });

// The same turn with the thinking text changed: the API refuses a thinking
// block that is not the one it signed.
const tampered = structuredClone(messages);
tampered[1].content = tampered[1].content.map((b) => (b.type === 'thinking' ? { ...b, thinking: b.thinking + ' (edited)' } : b));
let refused = null;
try {
  await client.messages.create({ ...params, messages: tampered });
} catch (e) {
  must(e instanceof Anthropic.APIError, 'an APIError', String(e));
  refused = { status: e.status, type: e.error?.error?.type, message: e.error?.error?.message };
}
report({
  refused,
  thinking: thinking[0].thinking,
  streamed_thinking: thinkingDeltas,
  signature: thinking[0].signature,
  final_text: textOf(second.content),
  final_stop: second.stop_reason,
});
