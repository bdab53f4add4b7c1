// @anthropic-ai/sdk prompt caching: a long system prompt with a cache_control
// breakpoint; the tool turn writes the cache, the answer turn (same prefix,
// sent after the first answer began) reads it.
import Anthropic from '@anthropic-ai/sdk';
import { TASK, anthropicModel, anthropicTool, must, report, textOf, weather } from './lib.mjs';
import { longSystem } from './long-system.mjs';

const client = new Anthropic();
const params = {
  model: anthropicModel,
  max_tokens: 1024,
  tools: [anthropicTool],
  system: [{ type: 'text', text: longSystem, cache_control: { type: 'ephemeral' } }],
};
const messages = [{ role: 'user', content: TASK }];

const first = await client.messages.create({ ...params, messages });
const uses = first.content.filter((b) => b.type === 'tool_use');
must(uses.length === 1, 'one tool_use', first);
messages.push({ role: 'assistant', content: first.content });
messages.push({ role: 'user', content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: weather(u.input) })) });
const second = await client.messages.create({ ...params, messages });
report({ first_usage: first.usage, second_usage: second.usage, final_text: textOf(second.content) });
