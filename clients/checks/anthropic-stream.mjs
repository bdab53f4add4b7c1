// @anthropic-ai/sdk messages.stream: both turns streamed, the text read from
// the stream's text events and the turn from finalMessage().
import Anthropic from '@anthropic-ai/sdk';
import { TASK, anthropicModel, anthropicTool, must, report, textOf, weather } from './lib.mjs';

const client = new Anthropic();
const params = { model: anthropicModel, max_tokens: 1024, tools: [anthropicTool] };
const messages = [{ role: 'user', content: TASK }];

async function turn() {
  const stream = client.messages.stream({ ...params, messages });
  let streamed = '';
  let inputJSON = '';
  stream.on('text', (d) => { streamed += d; });
  stream.on('inputJson', (d) => { inputJSON += d; });
  const msg = await stream.finalMessage();
  must(streamed === textOf(msg.content), 'streamed text equals finalMessage text', { streamed, msg });
  return { msg, inputJSON };
}

const { msg: first, inputJSON } = await turn();
const uses = first.content.filter((b) => b.type === 'tool_use');
must(first.stop_reason === 'tool_use' && uses.length === 1, 'first answer: one tool_use', first);
messages.push({ role: 'assistant', content: first.content });
messages.push({
  role: 'user',
  content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: weather(u.input) })),
});
const { msg: second } = await turn();
report({
  tool: uses[0].name,
  input: uses[0].input,
  input_json: JSON.parse(inputJSON),
  first_stop: first.stop_reason,
  final_stop: second.stop_reason,
  final_text: textOf(second.content),
  usage: second.usage,
});
