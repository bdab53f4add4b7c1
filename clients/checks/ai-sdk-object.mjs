// The Vercel AI SDK's structured output (generateText with Output.object, a
// zod schema) after a tool round trip, on the provider named by argv[2]; the
// provider sends the schema its wire's way (output_config.format,
// text.format, response_format).
import { generateText, Output } from 'ai';
import { z } from 'zod';
import { aiParams, calls } from './ai-sdk-model.mjs';
import { report } from './lib.mjs';

const Forecast = z.object({ city: z.string(), report: z.string(), sunny: z.boolean() });
const result = await generateText({ ...aiParams(process.argv[2]), output: Output.object({ schema: Forecast }) });
report({ calls, parsed: result.output, steps: result.steps.length });
