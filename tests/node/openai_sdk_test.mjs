// Drives `eaglet serve` with the official OpenAI Node SDK, unchanged. Run by tests/test_server.cpp
// with OPENAI_BASE_URL, OPENAI_API_KEY, EAGLET (the binary) and MODEL_DIR set.
import OpenAI from 'openai';
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
