// What the Vercel AI SDK checks share: the model of the provider named by
// argv[2] and the call's parameters, get_weather among its tools.
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { jsonSchema, stepCountIs, tool } from 'ai';
import { TASK, anthropicModel, must, openaiModel, weather, weatherDescription, weatherSchema } from './lib.mjs';

// anthropic: @ai-sdk/anthropic (the Messages API); openai: @ai-sdk/openai's
// default (the Responses API); openai-chat: its Chat Completions model. The
// providers' base URLs include /v1 (their defaults do).
const models = {
  anthropic: () => createAnthropic({ baseURL: `${process.env.ANTHROPIC_BASE_URL}/v1`, apiKey: process.env.ANTHROPIC_API_KEY })(anthropicModel),
  openai: () => createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY })(openaiModel),
  'openai-chat': () => createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY }).chat(openaiModel),
};

// calls records get_weather's inputs, in order.
export const calls = [];

export function aiParams(provider) {
  const make = models[provider];
  must(make, 'a provider argument: ' + Object.keys(models).join(', '), provider);
  return {
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
}
