// @anthropic-ai/sdk messages.parse with output_config.format (a zod schema,
// structured outputs): a tool round trip, then an answer the SDK parses.
import Anthropic from '@anthropic-ai/sdk';
import { zodOutputFormat } from '@anthropic-ai/sdk/helpers/zod';
import { z } from 'zod';
import { TASK, anthropicModel, anthropicTool, must, report, weather } from './lib.mjs';

const client = new Anthropic();
const Forecast = z.object({ city: z.string(), report: z.string(), sunny: z.boolean() });
const params = {
  model: anthropicModel, max_tokens: 1024, tools: [anthropicTool], output_config: { format: zodOutputFormat(Forecast) },
};
const messages = [{ role: 'user', content: TASK }];

const first = await client.messages.parse({ ...params, messages });
const uses = first.content.filter((b) => b.type === 'tool_use');
must(first.stop_reason === 'tool_use' && uses.length === 1, 'first answer: one tool_use', first);
// Sent back as the API sent it: parse() adds parsed_output, an SDK-side field.
messages.push({ role: 'assistant', content: first.content.map(({ parsed_output, ...b }) => b) });
messages.push({
  role: 'user',
  content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: weather(u.input) })),
});
const second = await client.messages.parse({ ...params, messages });
report({ parsed: second.parsed_output, final_stop: second.stop_reason });
