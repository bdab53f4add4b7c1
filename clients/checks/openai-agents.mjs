// OpenAI's Agents SDK (@openai/agents): an agent with one function tool run
// to its end on the Responses API, once plain and once streamed. Its trace
// export is off (OPENAI_AGENTS_DISABLE_TRACING=1, set by the Go test): it
// would post to OpenAI, not to the fake.
import { Agent, run, setDefaultOpenAIClient, tool } from '@openai/agents';
import OpenAI from 'openai';
import { TASK, openaiModel, report, weather, weatherDescription, weatherSchema } from './lib.mjs';

setDefaultOpenAIClient(new OpenAI({ maxRetries: 0 }));
const calls = [];
const agent = new Agent({
  name: 'weather',
  instructions: 'Answer weather questions with get_weather.',
  model: openaiModel,
  tools: [tool({
    name: 'get_weather',
    description: weatherDescription,
    parameters: weatherSchema,
    strict: true,
    execute: async (input) => { calls.push(input); return weather(input); },
  })],
});

const plain = await run(agent, TASK);
const streamed = await run(agent, TASK, { stream: true });
let deltas = '';
for await (const d of streamed.toTextStream()) deltas += d;
await streamed.completed;
report({ calls, plain_text: plain.finalOutput, stream_text: deltas, stream_final: streamed.finalOutput });
