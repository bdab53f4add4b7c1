// Drives the fake's Chat Completions wire with the official openai Node SDK
// (run by TestOpenAINodeSDK): a tool round trip that appends the assistant
// message exactly as the SDK returned it, the same streamed with
// include_usage, runTools, and parse with a zod json_schema. It prints one
// JSON line of what it saw; any SDK error exits non-zero. require() finds
// openai and zod through NODE_PATH, the client matrix's install: the
// versions clients/package.json pins (openai 7.59.0, zod 4.6.7 when this
// was written; helpers/zod takes zod 4 schemas there).
const OpenAI = require('openai');
const { zodResponseFormat, zodFunction } = require('openai/helpers/zod');
const { z } = require('zod');

const client = new OpenAI({ baseURL: process.env.FAKE_BASE_URL + '/v1', apiKey: 'test-key', maxRetries: 0 });
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  },
}];

async function roundTrip() {
  const messages = [{ role: 'user', content: 'weather?' }];
  const first = await client.chat.completions.create({ model: 'gpt-test', messages, tools });
  const msg = first.choices[0].message;
  messages.push(msg); // unchanged: annotations, refusal and all
  for (const call of msg.tool_calls) messages.push({ role: 'tool', tool_call_id: call.id, content: 'sunny' });
  const second = await client.chat.completions.create({ model: 'gpt-test', messages, tools });
  return { first: msg, second: second.choices[0].message.content };
}

async function streamed() {
  const messages = [{ role: 'user', content: 'weather?' }];
  const stream = client.chat.completions.stream({ model: 'gpt-test', messages, tools, stream_options: { include_usage: true } });
  const final = await stream.finalChatCompletion();
  messages.push(final.choices[0].message);
  for (const call of final.choices[0].message.tool_calls) messages.push({ role: 'tool', tool_call_id: call.id, content: 'sunny' });
  const again = await client.chat.completions.create({ model: 'gpt-test', messages, tools, stream: true, stream_options: { include_usage: true } });
  let text = '', usage = null;
  for await (const chunk of again) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  return { text, usage: usage && usage.total_tokens > 0 };
}

async function runTools() {
  const runner = client.chat.completions.runTools({
    model: 'gpt-test',
    messages: [{ role: 'user', content: 'weather?' }],
    tools: [zodFunction({ name: 'get_weather', parameters: z.object({ city: z.string() }), function: (args) => 'sunny in ' + args.city })],
  });
  return await runner.finalContent();
}

async function parse() {
  const Thing = z.object({ name: z.string(), count: z.number().int().min(2), tags: z.array(z.enum(['a', 'b'])) });
  const res = await client.chat.completions.parse({
    model: 'gpt-test',
    messages: [{ role: 'user', content: 'extract the thing' }],
    response_format: zodResponseFormat(Thing, 'thing'),
  });
  return res.choices[0].message.parsed;
}

(async () => {
  const out = { roundTrip: await roundTrip(), streamed: await streamed(), runTools: await runTools(), parsed: await parse() };
  console.log(JSON.stringify(out));
})().catch((err) => {
  console.error(String(err && err.stack || err));
  process.exit(1);
});
