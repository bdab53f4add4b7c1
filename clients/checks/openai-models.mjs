// openai models.list and models.retrieve, then a tool round trip on a model
// picked from the list, as a program choosing its model would.
import OpenAI from 'openai';
import { TASK, chatTool, must, report, weather } from './lib.mjs';

const client = new OpenAI();
const ids = [];
for await (const m of client.models.list()) ids.push(m.id);
must(ids.length > 0, 'models.list lists models', ids);
const model = ids.find((id) => id.startsWith('gpt-')) ?? ids[0];
const one = await client.models.retrieve(model);

const messages = [{ role: 'user', content: TASK }];
const first = await client.chat.completions.create({ model, tools: [chatTool], messages });
const msg = first.choices[0].message;
must(msg.tool_calls?.length === 1, 'one tool call', first);
messages.push(msg, ...msg.tool_calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: weather(c.function.arguments) })));
const second = await client.chat.completions.create({ model, tools: [chatTool], messages });
report({ ids, retrieved: one, model, text: second.choices[0].message.content });
