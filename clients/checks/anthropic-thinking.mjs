// @anthropic-ai/sdk with thinking and a tool, streamed: the thinking block
// (with its signature) goes back unchanged beside the tool_result, as the
// Messages API requires for a tool turn. argv[2]: "enabled" (extended
// thinking with a budget; then an edited block must be refused) or
// "omitted" (adaptive thinking with display: "omitted", as Claude Code asks:
// the text is redacted, the signature alone carries it).
import Anthropic from '@anthropic-ai/sdk';
import { TASK, anthropicModel, anthropicTool, must, refusal, report, textOf, weather } from './lib.mjs';

const configs = {
  enabled: { type: 'enabled', budget_tokens: 2048 },
  omitted: { type: 'adaptive', display: 'omitted' },
};
const mode = process.argv[2];
must(configs[mode], 'a mode argument: ' + Object.keys(configs).join(', '), mode);

const client = new Anthropic();
const params = { model: anthropicModel, max_tokens: 4096, tools: [anthropicTool], thinking: configs[mode] };
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
let edited = null;
if (mode === 'enabled') {
  const tampered = structuredClone(messages);
  tampered[1].content = tampered[1].content.map((b) => (b.type === 'thinking' ? { ...b, thinking: b.thinking + ' (edited)' } : b));
  edited = await refusal(() => client.messages.create({ ...params, messages: tampered }));
}
report({
  thinking: thinking[0].thinking,
  streamed_thinking: thinkingDeltas,
  signature: thinking[0].signature,
  final_text: textOf(second.content),
  final_stop: second.stop_reason,
  edited,
});
