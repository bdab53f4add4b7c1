// The Vercel AI SDK (ai) with one of its providers, argv[2] (ai-sdk-model.mjs):
// generateText and streamText each run get_weather through the SDK's own
// tool loop.
import { generateText, streamText } from 'ai';
import { aiParams, calls } from './ai-sdk-model.mjs';
import { report } from './lib.mjs';

const params = aiParams(process.argv[2]);

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
