// openai prompt caching (automatic on prompts of 1,024 tokens and more): the
// tool turn's prompt is cached, the answer turn's usage reports it in
// prompt_tokens_details.cached_tokens.
import OpenAI from 'openai';
import { TASK, chatTool, must, openaiModel, report, weather } from './lib.mjs';
import { longSystem } from './long-system.mjs';

const client = new OpenAI();
const params = { model: openaiModel, tools: [chatTool] };
const messages = [{ role: 'system', content: longSystem }, { role: 'user', content: TASK }];

const first = await client.chat.completions.create({ ...params, messages });
const msg = first.choices[0].message;
must(msg.tool_calls?.length === 1, 'one tool call', first);
messages.push(msg, ...msg.tool_calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: weather(c.function.arguments) })));
const second = await client.chat.completions.create({ ...params, messages });
report({ first_usage: first.usage, second_usage: second.usage, final_text: second.choices[0].message.content });
