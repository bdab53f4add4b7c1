// @anthropic-ai/sdk messages.create, not streamed: a tool_use answered by a
// tool_result, then the final answer.
import Anthropic from '@anthropic-ai/sdk';
import { TASK, anthropicModel, anthropicTool, must, refusal, report, textOf, weather } from './lib.mjs';

const client = new Anthropic(); // ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY
const params = { model: anthropicModel, max_tokens: 1024, tools: [anthropicTool] };
const messages = [{ role: 'user', content: TASK }];

const first = await client.messages.create({ ...params, messages });
const uses = first.content.filter((b) => b.type === 'tool_use');
must(first.stop_reason === 'tool_use' && uses.length === 1, 'first answer: one tool_use', first);
messages.push({ role: 'assistant', content: first.content });
messages.push({
  role: 'user',
  content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: weather(u.input) })),
});
const second = await client.messages.create({ ...params, messages });
// A field the API does not know is refused, named by its path.
const unknownField = await refusal(() => client.messages.create({ ...params, messages, bogus_field: 1 }));
report({
  unknown_field: unknownField,
  tool: uses[0].name,
  input: uses[0].input,
  first_stop: first.stop_reason,
  final_stop: second.stop_reason,
  final_text: textOf(second.content),
  usage: second.usage,
});
