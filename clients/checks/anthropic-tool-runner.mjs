// @anthropic-ai/sdk beta.messages.toolRunner: the SDK runs the tool itself
// and continues the conversation its own way (a thread), once plain and once
// streamed.
import Anthropic from '@anthropic-ai/sdk';
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema';
import { TASK, anthropicModel, must, report, textOf, weather, weatherDescription, weatherSchema } from './lib.mjs';

const client = new Anthropic();
const calls = [];
const tool = betaTool({
  name: 'get_weather',
  description: weatherDescription,
  inputSchema: weatherSchema,
  run: (input) => { calls.push(input); return weather(input); },
});

async function run(stream) {
  const runner = client.beta.messages.toolRunner({
    model: anthropicModel,
    max_tokens: 1024,
    messages: [{ role: 'user', content: TASK }],
    tools: [tool],
    stream,
  });
  const final = await runner.runUntilDone();
  must(final.stop_reason === 'end_turn', 'the runner ends on end_turn', final);
  return textOf(final.content);
}

const plain = await run(false);
const streamed = await run(true);
report({ calls, plain_text: plain, stream_text: streamed });
