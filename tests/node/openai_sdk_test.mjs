// Drives `eaglet serve` with the official OpenAI Node SDK, unchanged. Run by tests/test_server.cpp
// with OPENAI_BASE_URL, OPENAI_API_KEY, EAGLET (the binary) and MODEL_DIR set.
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';

const client = new OpenAI();
const model = 'stories';

function generate(prompt, n) {
  const out = execFileSync(process.env.EAGLET, ['generate', '-m', process.env.MODEL_DIR, '-p', prompt, '-n', String(n),
    '--temperature', '0', '--json'], { stdio: ['ignore', 'pipe', 'ignore'] });
  return JSON.parse(out.toString()).text;
}

// Models and a plain completion.
const models = await client.models.list();
assert.equal(models.data[0].id, model);
const c = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 24, temperature: 0 });
assert.equal(c.choices[0].text, generate('Once upon a time', 24));
assert.equal(c.usage.completion_tokens, 24);

// Chat, plain and streamed with usage.
const chat = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Tom had a dog' }],
  max_completion_tokens: 20, temperature: 0 });
assert.equal(chat.choices[0].message.content, generate('Tom had a dog', 20));
let streamed = '', usage = null;
const stream = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Tom had a dog' }],
  max_tokens: 20, temperature: 0, stream: true, stream_options: { include_usage: true } });
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const ch of chunk.choices) streamed += ch.delta.content ?? '';
}
assert.equal(streamed, chat.choices[0].message.content);
assert.equal(usage.completion_tokens, 20);

// Seeds, n, stop, logprobs.
const s1 = await client.completions.create({ model, prompt: 'The cat', max_tokens: 16, temperature: 1, seed: 3, n: 2 });
const s2 = await client.completions.create({ model, prompt: 'The cat', max_tokens: 16, temperature: 1, seed: 3, n: 2 });
assert.deepEqual(s1.choices.map(x => x.text), s2.choices.map(x => x.text));
const st = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0, stop: ['girl'] });
assert.equal(st.choices[0].finish_reason, 'stop');
assert.ok(!st.choices[0].text.includes('girl'));
const lp = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 4, temperature: 0, logprobs: 2 });
assert.equal(lp.choices[0].logprobs.tokens.length, 4);
assert.ok(lp.choices[0].logprobs.token_logprobs.every(x => x <= 0));

// Errors surface as the SDK's typed errors.
// lm-evaluation-harness's loglikelihood request: echo + logprobs + max_tokens 0 scores the prompt.
const ll = await client.completions.create({ model, prompt: 'Once upon a time there was', max_tokens: 0, echo: true, logprobs: 1, temperature: 0 });
assert.equal(ll.choices[0].logprobs.token_logprobs[0], null);
assert.ok(ll.choices[0].logprobs.token_logprobs.slice(1).every(x => x <= 0));
assert.equal(ll.choices[0].logprobs.tokens.length, ll.usage.prompt_tokens);
// Several prompts in one request, n choices each.
const many = await client.completions.create({ model, prompt: ['Once upon a time', 'Tom had a dog'], max_tokens: 8, temperature: 0 });
assert.deepEqual(many.choices.map(x => x.index), [0, 1]);
assert.equal(many.choices[0].text, generate('Once upon a time', 8));
// Structured output: a JSON schema response parses and follows the schema.
const schema = { type: 'object', properties: { mood: { enum: ['happy', 'sad'] }, age: { type: 'integer', minimum: 1, maximum: 9 } },
  required: ['mood', 'age'] };
const structured = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'How is Lily?' }], max_tokens: 200,
  temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'lily', schema, strict: true } } });
const answer = JSON.parse(structured.choices[0].message.content);
assert.deepEqual(Object.keys(answer), ['mood', 'age']);
assert.ok(['happy', 'sad'].includes(answer.mood) && answer.age >= 1 && answer.age <= 9);
assert.equal(structured.choices[0].finish_reason, 'stop');
// A zod response_format, through the SDK's parse helper, plain and streamed.
const Story = z.object({ hero: z.enum(['Lily', 'Tom', 'Sam']), age: z.number().int().min(2).max(9), happy: z.boolean() });
const zmsgs = [{ role: 'user', content: 'Tell me about the hero of a story' }];
const zp = await client.beta.chat.completions.parse({ model, messages: zmsgs, max_tokens: 256, temperature: 0,
  response_format: zodResponseFormat(Story, 'story') });
assert.ok(Story.safeParse(zp.choices[0].message.parsed).success, JSON.stringify(zp.choices[0].message));
const zs = client.beta.chat.completions.stream({ model, messages: zmsgs, max_tokens: 256, temperature: 0,
  response_format: zodResponseFormat(Story, 'story') });
const zfinal = await zs.finalChatCompletion();
assert.deepEqual(zfinal.choices[0].message.parsed, zp.choices[0].message.parsed);

// Tools: a forced call ("required" and a named function), plain and streamed; the arguments
// follow the tool's schema; the call and its result go back in the next request.
const weather = { type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
    required: ['city', 'days'] } } };
const clock = { type: 'function', function: { name: 'now', parameters: { type: 'object', properties: {} } } };
const tmsgs = [{ role: 'user', content: 'What is the weather in Paris?' }];
for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
  const req = { model, messages: tmsgs, tools: [weather, clock], tool_choice, parallel_tool_calls: false, max_tokens: 256, temperature: 0 };
  const t = await client.chat.completions.create(req);
  assert.equal(t.choices[0].finish_reason, 'tool_calls', JSON.stringify(t.choices[0]));
  const calls = t.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].type, 'function');
  assert.ok(calls[0].id.length > 0);
  const args = JSON.parse(calls[0].function.arguments);
  if (calls[0].function.name === 'get_weather') assert.ok(typeof args.city === 'string' && Number.isInteger(args.days), calls[0].function.arguments);
  else assert.equal(calls[0].function.name, 'now');
  // Streamed: the SDK's own accumulation of the deltas gives the same calls.
  let first = null;
  const s = client.beta.chat.completions.stream({ ...req, stream: true });
  s.on('chunk', chunk => { const d = chunk.choices[0]?.delta?.tool_calls?.[0]; if (d && !first) first = d; });
  const final = await s.finalChatCompletion();
  assert.equal(first.id !== undefined && first.type === 'function' && first.function.name !== undefined, true, JSON.stringify(first));
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(final.choices[0].message.tool_calls[0].function.name, calls[0].function.name);
  assert.equal(final.choices[0].message.tool_calls[0].function.arguments, calls[0].function.arguments);
  // The call and its result, sent back.
  const next = await client.chat.completions.create({ model, max_tokens: 8, temperature: 0, tools: [weather, clock],
    messages: [...tmsgs, t.choices[0].message, { role: 'tool', tool_call_id: calls[0].id, content: '{"temp": 21}' }] });
  assert.equal(next.choices[0].message.role, 'assistant');
}
// zod tools through the parse helper: the arguments come back parsed.
const zt = await client.beta.chat.completions.parse({ model, messages: tmsgs, max_tokens: 256, temperature: 0, tool_choice: 'required', parallel_tool_calls: false,
  tools: [zodFunction({ name: 'get_weather', parameters: z.object({ city: z.string().max(12), days: z.number().int().min(1).max(7) }) })] });
const parsedArgs = zt.choices[0].message.tool_calls[0].function.parsed_arguments;
assert.ok(typeof parsedArgs.city === 'string' && Number.isInteger(parsedArgs.days), JSON.stringify(zt.choices[0].message));
// "auto" (the server runs --enable-auto-tool-choice --tool-call-parser hermes): this model never
// calls, so the answer is text.
const auto = await client.chat.completions.create({ model, messages: tmsgs, tools: [weather], max_tokens: 8, temperature: 0 });
assert.equal(auto.choices[0].message.tool_calls, undefined);
assert.equal(auto.choices[0].message.content, generate('What is the weather in Paris?', 8));
await assert.rejects(client.chat.completions.create({ model, messages: tmsgs, tools: [weather],
  tool_choice: { type: 'function', function: { name: 'nope' } } }), e => e.status === 400 && e.param === 'tool_choice.function.name');

// An option eaglet does not implement is refused, never ignored.
await assert.rejects(client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }],
  response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'email' } } } }),
                     e => e.status === 400 && e.param === 'response_format.json_schema.schema');
await assert.rejects(client.completions.create({ model: 'nope', prompt: 'x' }), e => e.status === 404);
await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: -1 }), e => e.status === 400);
const bad = new OpenAI({ apiKey: 'wrong', maxRetries: 0 });
await assert.rejects(bad.models.list(), e => e.status === 401);

// 32 concurrent streaming requests with mixed prompt lengths: each equals its single-request output.
const starts = ['Once upon a time', 'Lily', 'The little dog ran to the park and saw a big red ball', 'Tom and Sam',
  'One day, a girl named Mia went to the store with her mom to buy some food'];
const prompts = Array.from({ length: 32 }, (_, i) => starts[i % starts.length] + (i % 3 === 0 ? ' and' : ''));
const alone = [];
for (const p of prompts.slice(0, starts.length * 3)) {
  const r = await client.completions.create({ model, prompt: p, max_tokens: 32, temperature: 0 });
  alone.push([p, r.choices[0].text]);
}
const single = new Map(alone);
const together = await Promise.all(prompts.map(async p => {
  let text = '';
  const s = await client.completions.create({ model, prompt: p, max_tokens: 32, temperature: 0, stream: true });
  for await (const chunk of s) text += chunk.choices[0]?.text ?? '';
  return [p, text];
}));
for (const [p, text] of together) assert.equal(text, single.get(p), `under load: ${p}`);
console.log('all OpenAI SDK checks passed');
