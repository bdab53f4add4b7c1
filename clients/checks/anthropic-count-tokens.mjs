// @anthropic-ai/sdk messages.countTokens over a conversation holding a tool
// round trip: it counts what create is then billed for.
import Anthropic from '@anthropic-ai/sdk';
import { TASK, anthropicModel, anthropicTool, must, report, textOf, weather } from './lib.mjs';

const client = new Anthropic();
const params = { model: anthropicModel, tools: [anthropicTool] };
const messages = [{ role: 'user', content: TASK }];

const first = await client.messages.create({ ...params, max_tokens: 1024, messages });
const uses = first.content.filter((b) => b.type === 'tool_use');
must(uses.length === 1, 'first answer: one tool_use', first);
messages.push({ role: 'assistant', content: first.content });
messages.push({
  role: 'user',
  content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: weather(u.input) })),
});
const counted = await client.messages.countTokens({ ...params, messages });
const second = await client.messages.create({ ...params, max_tokens: 1024, messages });
const u = second.usage;
report({
  counted: counted.input_tokens,
  billed: u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0),
  final_text: textOf(second.content),
});
