// The Vercel AI SDK (ai) with one of its providers, argv[2]: anthropic
// (@ai-sdk/anthropic, the Messages API), openai (@ai-sdk/openai's default, the
// Responses API) or openai-chat (its Chat Completions model). generateText and
// streamText each run get_weather through the SDK's own tool loop.
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { TASK, anthropicModel, must, openaiModel, report, weather, weatherDescription, weatherSchema } from './lib.mjs';

// The providers' base URLs include /v1 (their defaults do).
const models = {
  anthropic: () => createAnthropic({ baseURL: `${process.env.ANTHROPIC_BASE_URL}/v1`, apiKey: process.env.ANTHROPIC_API_KEY })(anthropicModel),
  openai: () => createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY })(openaiModel),
  'openai-chat': () => createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY }).chat(openaiModel),
};
const make = models[process.argv[2]];
must(make, 'a provider argument: ' + Object.keys(models).join(', '), process.argv[2]);

const calls = [];
const params = {
  model: make(),
  prompt: TASK,
  tools: {
    get_weather: tool({
      description: weatherDescription,
      inputSchema: jsonSchema(weatherSchema),
      execute: async (input) => { calls.push(input); return weather(input); },
    }),
  },
  stopWhen: stepCountIs(3),
  maxRetries: 0, // a refused request fails the check rather than being retried
};

const plain = await generateText(params);
let streamError = null;
const streamed = streamText({ ...params, onError: ({ error }) => { streamError = error; } });
let deltas = '';
for await (const d of streamed.textStream) deltas += d;
if (streamError) throw streamError;
report({
  calls,
  plain_text: plain.text,
  plain_steps: plain.steps.length,
  plain_finish: plain.finishReason,
  stream_text: deltas,
  stream_steps: (await streamed.steps).length,
  stream_usage: await streamed.totalUsage,
});
