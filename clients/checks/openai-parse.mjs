// openai chat.completions.parse with a json_schema response format (zod):
// a tool round trip, then an answer the SDK parses against the schema.
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { TASK, chatTool, must, openaiModel, report, weather } from './lib.mjs';

const client = new OpenAI();
const Forecast = z.object({ city: z.string(), report: z.string(), sunny: z.boolean() });
// parse auto-parses only strict tools, and strict needs a closed schema (lib.mjs's is).
const tool = { ...chatTool, function: { ...chatTool.function, strict: true } };
const params = { model: openaiModel, tools: [tool], response_format: zodResponseFormat(Forecast, 'forecast') };

// A conversation's two turns, each a ChatCompletion with parsed content: by
// parse(), or streamed by chat.completions.stream() and its
// finalChatCompletion().
async function conversation(turn) {
  const messages = [{ role: 'user', content: TASK }];
  const first = await turn(messages);
  const msg = first.choices[0].message;
  must(msg.tool_calls?.length === 1, 'one tool call', first);
  // Sent back as a message param: parse() adds parsed and parsed_arguments,
  // SDK-side fields, to what the API sent (openai-chat.mjs echoes a create()
  // message unchanged).
  messages.push({
    role: 'assistant',
    content: msg.content,
    tool_calls: msg.tool_calls.map(({ id, type, function: { name, arguments: args } }) => ({ id, type, function: { name, arguments: args } })),
  });
  for (const c of msg.tool_calls) {
    messages.push({ role: 'tool', tool_call_id: c.id, content: weather(c.function.arguments) });
  }
  return (await turn(messages)).choices[0].message.parsed;
}

const plain = await conversation((messages) => client.chat.completions.parse({ ...params, messages }));
const streamed = await conversation((messages) =>
  client.chat.completions.stream({ ...params, messages }).finalChatCompletion());
report({ parsed: plain, stream_parsed: streamed });
