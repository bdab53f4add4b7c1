// openai against injected faults (the Go test starts the fake with
// --fault): the SDK's own retries carry the first turn through a 429
// (retry-after-ms honoured) and a 500; a streamed second turn cut mid-body
// fails as a broken stream, and sent again, not streamed, it completes.
import OpenAI from 'openai';
import { TASK, chatTool, must, openaiModel, report, weather } from './lib.mjs';

const client = new OpenAI(); // maxRetries: 2, the SDK's default
const params = { model: openaiModel, tools: [chatTool] };
const messages = [{ role: 'user', content: TASK }];

const first = await client.chat.completions.create({ ...params, messages });
const msg = first.choices[0].message;
must(msg.tool_calls?.length === 1, 'one tool call after the retries', first);
messages.push(msg, ...msg.tool_calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: weather(c.function.arguments) })));

let streamError = null;
try {
  const stream = await client.chat.completions.create({ ...params, messages, stream: true });
  for await (const _ of stream);
} catch (e) {
  streamError = { name: e.constructor.name, message: String(e.message).slice(0, 200) };
}
const second = await client.chat.completions.create({ ...params, messages });
report({ final_text: second.choices[0].message.content, stream_error: streamError });
