// openai responses.create with a function tool, twice: not streamed, the
// second turn continuing by previous_response_id; then streamed, the second
// turn sending the first's output items back (stateless, store: false).
import OpenAI from 'openai';
import { TASK, must, openaiModel, refusal, report, weather, weatherDescription, weatherSchema } from './lib.mjs';

const client = new OpenAI();
const tools = [{
  type: 'function', name: 'get_weather', description: weatherDescription, parameters: weatherSchema, strict: true,
}];

const outputFor = (items) =>
  items.filter((i) => i.type === 'function_call')
    .map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: weather(c.arguments) }));

async function plain() {
  const first = await client.responses.create({ model: openaiModel, input: TASK, tools });
  const calls = first.output.filter((i) => i.type === 'function_call');
  must(first.status === 'completed' && calls.length === 1, 'one function_call', first);
  const second = await client.responses.create({
    model: openaiModel, previous_response_id: first.id, input: outputFor(first.output), tools,
  });
  return { call: { name: calls[0].name, arguments: calls[0].arguments }, text: second.output_text, usage: second.usage };
}

// turn streams one request, collecting its event types and the completed response.
async function turn(input) {
  const stream = await client.responses.create({ model: openaiModel, input, tools, store: false, stream: true });
  const events = [];
  let deltas = '', done = null;
  for await (const ev of stream) {
    events.push(ev.type);
    if (ev.type === 'response.output_text.delta') deltas += ev.delta;
    if (ev.type === 'response.completed') done = ev.response;
  }
  must(done, 'a response.completed event', events);
  return { done, deltas, events: [...new Set(events)] };
}

async function streamed() {
  const input = [{ role: 'user', content: TASK }];
  const first = await turn(input);
  const calls = first.done.output.filter((i) => i.type === 'function_call');
  must(calls.length === 1, 'one streamed function_call', first);
  input.push(...first.done.output, ...outputFor(first.done.output));
  const second = await turn(input);
  return { call: { name: calls[0].name, arguments: calls[0].arguments }, text: second.deltas,
    final_text: second.done.output_text ?? null, events: first.events.concat(second.events) };
}

// A continuation of a response that does not exist, and an unknown parameter.
const unknownPrevious = await refusal(() =>
  client.responses.create({ model: openaiModel, previous_response_id: 'resp_doesnotexist0000', input: TASK, tools }));
const unknownField = await refusal(() => client.responses.create({ model: openaiModel, input: TASK, tools, bogus_field: 1 }));
report({ plain: await plain(), stream: await streamed(), unknown_previous: unknownPrevious, unknown_field: unknownField });
