// openai chat.completions.runTools: the SDK calls the tool and loops, once
// plain and once streamed.
import OpenAI from 'openai';
import { TASK, openaiModel, report, weather, weatherDescription, weatherSchema } from './lib.mjs';

const client = new OpenAI();
const calls = [];
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: weatherDescription,
    parameters: weatherSchema,
    parse: JSON.parse,
    function: (args) => { calls.push(args); return weather(args); },
  },
}];

async function run(stream) {
  const runner = client.chat.completions.runTools({
    model: openaiModel, messages: [{ role: 'user', content: TASK }], tools, stream,
  });
  return runner.finalContent();
}

report({ plain_text: await run(false), stream_text: await run(true), calls });
