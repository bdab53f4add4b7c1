// openai chat.completions.create with a tool, twice: not streamed, sending the
// assistant message it received back unchanged (annotations, refusal and all,
// as programs do); then streamed with stream_options.include_usage, the
// message rebuilt from the deltas.
import OpenAI from 'openai';
import { TASK, chatTool, must, openaiModel, refusal, report, weather } from './lib.mjs';

const client = new OpenAI(); // OPENAI_BASE_URL, OPENAI_API_KEY
const params = { model: openaiModel, tools: [chatTool] };

async function plain() {
  const messages = [{ role: 'user', content: TASK }];
  const first = await client.chat.completions.create({ ...params, messages });
  const msg = first.choices[0].message;
  must(first.choices[0].finish_reason === 'tool_calls' && msg.tool_calls?.length === 1, 'one tool call', first);
  messages.push(msg); // unchanged, every field the fake sent
  for (const c of msg.tool_calls) {
    messages.push({ role: 'tool', tool_call_id: c.id, content: weather(c.function.arguments) });
  }
  const second = await client.chat.completions.create({ ...params, messages });
  return { echoed: Object.keys(msg).sort(), call: msg.tool_calls[0].function, text: second.choices[0].message.content };
}

// turn streams one request and rebuilds the assistant message from its chunks.
async function turn(messages) {
  const stream = await client.chat.completions.create({
    ...params, messages, stream: true, stream_options: { include_usage: true },
  });
  let content = '', finish = null, usage = null, chunks = 0;
  const calls = [];
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    content += choice.delta.content ?? '';
    finish = choice.finish_reason ?? finish;
    for (const d of choice.delta.tool_calls ?? []) {
      const c = (calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
      c.id ||= d.id ?? '';
      c.function.name += d.function?.name ?? '';
      c.function.arguments += d.function?.arguments ?? '';
    }
  }
  return { content, finish, usage, calls, chunks };
}

async function streamed() {
  const messages = [{ role: 'user', content: TASK }];
  const first = await turn(messages);
  must(first.finish === 'tool_calls' && first.calls.length === 1, 'one streamed tool call', first);
  messages.push({ role: 'assistant', content: first.content || null, tool_calls: first.calls });
  for (const c of first.calls) {
    messages.push({ role: 'tool', tool_call_id: c.id, content: weather(c.function.arguments) });
  }
  const second = await turn(messages);
  return { call: first.calls[0].function, text: second.content, usage: second.usage, finish: second.finish };
}

// A parameter the API does not know is refused.
const unknownField = await refusal(() =>
  client.chat.completions.create({ ...params, messages: [{ role: 'user', content: TASK }], bogus_field: 1 }));
report({ plain: await plain(), stream: await streamed(), unknown_field: unknownField });
