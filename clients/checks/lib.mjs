// What the SDK checks share: the one tool they offer (get_weather), what it
// answers, and how a check reports. The Go test (clients_test.go) reads the
// last line a check prints, one JSON object, and compares it with what the
// fake received; the scenario (scenarios/weather.yaml) calls the tool on the
// first turn and quotes its result on the second, so the final text holding
// MARK proves the result made the whole round trip.

export const TASK = 'What is the weather in Paris? Use get_weather.';
// The Go test sets the mark, so one side says it.
export const MARK = process.env.DEPUTY_CHECK_MARK;
if (!MARK) throw new Error('DEPUTY_CHECK_MARK is not set: run the checks through clients_test.go');

export const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string', description: 'The city' } },
  required: ['city'],
  additionalProperties: false,
};
export const weatherDescription = 'The current weather in a city.';

// weather is the tool's implementation: what the client sends back.
export function weather(input) {
  const { city } = typeof input === 'string' ? JSON.parse(input) : input;
  return `${city}: 18C, sunny (${MARK})`;
}

// Models the fake's GET /v1/models lists (the current ones), as a program
// picking a real model would.
export const anthropicModel = 'claude-sonnet-4-6';
export const openaiModel = 'gpt-5.6-terra';

// The Anthropic wire's tool definition and a text block's join.
export const anthropicTool = {
  name: 'get_weather',
  description: weatherDescription,
  input_schema: weatherSchema,
};
export const textOf = (content) =>
  content.filter((b) => b.type === 'text').map((b) => b.text).join('');

// The Chat Completions wire's tool definition.
export const chatTool = {
  type: 'function',
  function: { name: 'get_weather', description: weatherDescription, parameters: weatherSchema },
};

export function report(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// must throws when cond is false, so a check fails where the client did
// something unexpected rather than printing a half-empty report.
export function must(cond, what, got) {
  if (!cond) throw new Error(`${what}; got ${JSON.stringify(got)}`);
}

// refusal runs a request the API must refuse and returns how the SDK saw
// the refusal: status and the error body's type, message, param and code
// (Anthropic: {type: "error", error: {type, message}}; OpenAI: {error:
// {message, type, param, code}}). A request that succeeds fails the check.
export async function refusal(request) {
  try {
    await request();
  } catch (e) {
    must(typeof e.status === 'number', 'an API error with a status', String(e));
    const body = e.error?.error ?? e.error ?? {};
    return { status: e.status, type: body.type, message: body.message, param: body.param ?? null, code: body.code ?? null };
  }
  throw new Error('the request was accepted; the API refuses it');
}
