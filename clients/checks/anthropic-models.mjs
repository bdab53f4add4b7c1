// @anthropic-ai/sdk models.list and models.retrieve, then a tool round trip
// on a model picked from the list, as a program choosing its model would.
import Anthropic from '@anthropic-ai/sdk';
import { TASK, anthropicTool, must, report, textOf, weather } from './lib.mjs';

const client = new Anthropic();
const ids = [];
for await (const m of client.models.list()) ids.push(m.id);
must(ids.length > 0, 'models.list lists models', ids);
const model = ids.find((id) => id.includes('sonnet')) ?? ids[0];
const one = await client.models.retrieve(model);

const params = { model, max_tokens: 1024, tools: [anthropicTool] };
const messages = [{ role: 'user', content: TASK }];
const first = await client.messages.create({ ...params, messages });
const uses = first.content.filter((b) => b.type === 'tool_use');
must(uses.length === 1, 'one tool_use', first);
messages.push({ role: 'assistant', content: first.content });
messages.push({ role: 'user', content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: weather(u.input) })) });
const second = await client.messages.create({ ...params, messages });
report({ ids, retrieved: one, model, text: textOf(second.content) });
